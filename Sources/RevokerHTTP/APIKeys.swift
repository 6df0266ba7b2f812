import Crypto
import HTTPTypes
import Hummingbird

/// The configured bearer keys: who is calling, and may they do this?
///
/// Only SHA-256 digests are held. A presented key is hashed and compared with every
/// configured digest in constant time, so neither a match's position nor a shared prefix
/// shows in the timing.
struct APIKeys: Sendable {
    let keys: [APIKey]

    /// The caller when its key grants `scope` (or `admin`); 401 or 403 otherwise.
    func authorize(_ request: Request, _ scope: APIScope) throws -> APICaller {
        guard let header = request.headers[.authorization] else {
            throw Self.unauthorized("An API key is required: send Authorization: Bearer <key>.")
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw Self.unauthorized("The Authorization header must be 'Bearer <key>'.")
        }
        guard let found = key(presented: parts[1]) else { throw Self.unauthorized("The API key is not known.") }
        return try Self.caller(found, scope)
    }

    /// The configured key whose digest is the SHA-256 of `presented`.
    func key(presented: some StringProtocol) -> APIKey? {
        key(sha256: Array(SHA256.hash(data: Array(presented.utf8))))
    }

    /// The configured key with this digest, compared with every one in constant time.
    func key(sha256 digest: [UInt8]) -> APIKey? {
        var found: APIKey?
        for key in keys where Self.constantTimeEqual(key.sha256, digest) {
            found = key
        }
        return found
    }

    /// The caller `key` stands for when it grants `scope` (or `admin`); 403 otherwise.
    static func caller(_ key: APIKey, _ scope: APIScope) throws -> APICaller {
        guard key.scopes.contains(scope) || key.scopes.contains(.admin) else {
            throw APIProblem(.forbidden, "The API key '\(key.name)' lacks the scope '\(scope.rawValue)'.")
        }
        return APICaller(name: key.name, clientIDs: key.clientIDs)
    }

    static func unauthorized(_ detail: String) -> APIProblem {
        var problem = APIProblem(.unauthorized, detail)
        problem.headers[.wwwAuthenticate] = "Bearer realm=\"revoker\""
        return problem
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}

/// Who is calling, and which apps their key reaches.
struct APICaller: Sendable {
    /// The key's name, recorded as the actor.
    let name: String
    /// The apps the key is limited to; nil for every app.
    let clientIDs: Set<String>?

    func reaches(_ clientID: String) -> Bool { clientIDs?.contains(clientID) ?? true }

    /// 403 for an app outside the key's limit that the caller named itself.
    func require(_ clientID: String) throws {
        guard reaches(clientID) else {
            throw APIProblem(.forbidden, "The API key '\(name)' is limited to other apps.", field: "client_id")
        }
    }

    /// The key's limit as a filter: nil for every app.
    var filter: [String]? { clientIDs.map { $0.sorted() } }
}
