import Crypto
import Foundation
import Logging
import RevokerProvider

/// Takes the tokens a backend already holds into custody (refresh tokens; a person's access
/// token where the provider's grants come as one): one JSON object per line
/// (`revoker grants import`), registered in batches, resumable from a progress record.
///
/// Registering is idempotent (the same token for the same account is the same grant), so a
/// batch cut short by a crash is simply registered again; the progress record only saves the
/// re-reading of what was already taken in.
public struct GrantImport: Sendable {
    /// The fields a line may have.
    public static let fields = ["provider", "client_id", "account_reference", "refresh_token", "access_token", "user_id"]
    /// The longest line read; anything longer is refused unread.
    public static let maximumLineBytes = 16_384
    /// Lines read and registered between two progress records.
    public static let batchSize = 64
    /// Registrations in flight at once: enough to keep a database busy, few enough to leave
    /// connections to the workers and the API.
    static let parallel = 4

    public let queue: RevocationQueue
    /// What a line may name: a configured provider's app, with a token its grants come as.
    public let rules: EnqueueRules
    /// The provider of a line that names none.
    public let defaultProvider: String
    /// The `client_id` of a line that names none.
    public let defaultClientID: String?
    public let actor: String
    public let logger: Logger

    public init(
        queue: RevocationQueue,
        rules: EnqueueRules,
        defaultProvider: String = NewRevocation.defaultProvider,
        defaultClientID: String? = nil,
        actor: String,
        logger: Logger
    ) {
        self.queue = queue
        self.rules = rules
        self.defaultProvider = defaultProvider
        self.defaultClientID = defaultClientID
        self.actor = actor
        self.logger = logger
    }

    /// Why a line was not taken in, said without repeating the line (it holds a token).
    public struct Refusal: Error, Sendable, Equatable {
        public let reason: String
    }

    /// What became of one line.
    public enum LineResult: Sendable {
        /// Taken into custody now.
        case held(Grant)
        /// The same token was already held for the same account.
        case existing(Grant)
        case refused(Refusal)
    }

    /// How far an import got: the lines and bytes of the input already taken in (every line
    /// before `bytes` has its result), with a digest of those bytes so a resumed import knows
    /// it reads the same input.
    public struct Progress: Codable, Sendable, Equatable {
        public var lines = 0
        public var bytes = 0
        /// SHA-256 (hex) of the first ``bytes`` bytes.
        public var digest = Progress.emptyDigest
        public var held = 0
        public var existing = 0
        public var refused = 0

        public init() {}

        static let emptyDigest = SHA256.hash(data: Data()).map { String(format: "%02x", $0) }.joined()
    }

    /// The grant one line describes, or nil for a blank line.
    public func parse(_ line: [UInt8]) throws(Refusal) -> NewGrant? {
        guard line.contains(where: { !($0 == 0x20 || $0 == 0x09 || $0 == 0x0D) }) else { return nil }
        guard line.count <= Self.maximumLineBytes else {
            throw Refusal(reason: "the line is longer than \(Self.maximumLineBytes) bytes")
        }
        let object: [String: JSONValue]
        do {
            object = try StrictJSON.object(line)
        } catch {
            throw Refusal(reason: error.reason.replacingOccurrences(of: "The body", with: "the line").trimmingCharacters(in: ["."]))
        }
        // An unknown key is not named: a misplaced token would be printed.
        guard object.keys.allSatisfy(Self.fields.contains) else {
            throw Refusal(reason: "it has a field other than \(Self.fields.joined(separator: ", "))")
        }
        func text(_ field: String) throws(Refusal) -> String? {
            switch object[field] {
            case nil, .null: return nil
            case .string(let value): return value
            default: throw Refusal(reason: "\(field) must be a string")
            }
        }
        let tokens = [(CredentialKind.refreshToken, try text("refresh_token")), (.accessToken, try text("access_token"))]
            .compactMap { kind, token in token.map { Credential(kind: kind, secret: $0) } }
        guard tokens.count == 1, let credential = tokens.first else {
            throw Refusal(
                reason: tokens.isEmpty
                    ? "refresh_token is missing (import takes refresh tokens, or access tokens where a provider's grants are one; register codes at sign-in)"
                    : "give one of refresh_token and access_token"
            )
        }
        guard let reference = try text("account_reference") else { throw Refusal(reason: "account_reference is missing") }
        let provider = try text("provider") ?? defaultProvider
        guard let clientID = try text("client_id") ?? defaultClientID else {
            throw Refusal(reason: "client_id is missing (or give a default client_id)")
        }
        let userID = try text("user_id")
        let grant: NewGrant
        do throws(NewRevocation.Invalid) {
            grant = try NewGrant(
                provider: provider,
                clientID: clientID,
                accountReference: reference,
                credential: credential,
                userID: userID
            )
        } catch {
            let field =
                switch error.field {
                case .externalReference: "account_reference"
                case .userID: "user_id"
                case .credential: credential.kind.rawValue
                default: error.field.rawValue
                }
            throw Refusal(reason: "\(field) \(error.rule)")
        }
        do throws(EnqueueRules.Refusal) {
            try rules.check(grant)
        } catch {
            switch error {
            case .unknownProvider(let configured):
                throw Refusal(reason: "provider \(grant.provider) is not configured (configured: \(configured.joined(separator: ", ")))")
            case .unknownApp: throw Refusal(reason: "client_id \(grant.clientID) is not a configured \(grant.provider) app")
            case .unsupportedCredential(let accepted):
                let takes = [CredentialKind.refreshToken, .accessToken].map(\.rawValue).filter(accepted.contains)
                throw Refusal(
                    reason:
                        "provider \(grant.provider)'s grants are imported as \(takes.isEmpty ? "nothing" : takes.joined(separator: " or ")), not \(credential.kind.rawValue)"
                )
            default: throw Refusal(reason: "the line cannot be taken in")
            }
        }
        return grant
    }

    /// Registers the parsed `grants` (nil for a blank line) and returns each one's result.
    /// Lines are registered a few at a time, except that a token repeated in the batch waits for its
    /// first line, so the earlier line always wins.
    public func register(_ grants: [Result<NewGrant?, Refusal>]) async throws -> [LineResult?] {
        var results = [LineResult?](repeating: nil, count: grants.count)
        var first: [[UInt8]: Int] = [:]
        var repeats: [Int] = []
        var now: [(Int, NewGrant)] = []
        for (index, line) in grants.enumerated() {
            switch line {
            case .failure(let refusal): results[index] = .refused(refusal)
            case .success(nil): break
            case .success(let grant?):
                if first.updateValue(index, forKey: grant.credential.digest) == nil { now.append((index, grant)) } else { repeats.append(index) }
            }
        }
        try await withThrowingTaskGroup(of: (Int, LineResult).self) { group in
            var waiting = now[...]
            for _ in 0..<Self.parallel {
                guard let (index, grant) = waiting.popFirst() else { break }
                group.addTask { (index, try await register(grant)) }
            }
            for try await (index, result) in group {
                results[index] = result
                if let (index, grant) = waiting.popFirst() { group.addTask { (index, try await register(grant)) } }
            }
        }
        for index in repeats {
            if case .success(let grant?) = grants[index] { results[index] = try await register(grant) }
        }
        return results
    }

    private func register(_ grant: NewGrant) async throws -> LineResult {
        do {
            switch try await queue.custody.register(grant, actor: actor, logger: logger) {
            case .created(let held): return .held(held)
            case .existing(let held): return .existing(held)
            }
        } catch let error as RevokerStoreError where error.code == .conflict {
            return .refused(Refusal(reason: "this refresh token is held for another account or provider"))
        }
    }

    /// Reads `input` from where `progress` left it (checking the bytes it already read are the
    /// same), and takes in every line, a batch at a time. After each batch `report` hears each
    /// line's result (1-based line numbers, in order) and the progress to record.
    public func run(
        _ input: FileHandle,
        from progress: Progress,
        report: (_ results: [(line: Int, result: LineResult)], _ progress: Progress) throws -> Void
    ) async throws -> Progress {
        var reader = LineReader(input)
        var progress = progress
        if progress.bytes > 0 {
            let lines = try reader.skip(progress.bytes)
            guard reader.bytes == progress.bytes, lines == progress.lines, reader.digest == progress.digest else {
                throw Refusal(reason: "the input is not the one this progress record was made from (its first \(progress.lines) lines differ)")
            }
        }
        while true {
            var batch: [[UInt8]] = []
            while batch.count < Self.batchSize, let line = try reader.next() {
                batch.append(line)
            }
            if batch.isEmpty { break }
            let parsed = batch.map { line in Result<NewGrant?, Refusal> { () throws(Refusal) in try parse(line) } }
            var told: [(line: Int, result: LineResult)] = []
            for (offset, result) in try await register(parsed).enumerated() {
                switch result {
                case .held: progress.held += 1
                case .existing: progress.existing += 1
                case .refused: progress.refused += 1
                case nil: continue
                }
                if let result { told.append((progress.lines + offset + 1, result)) }
            }
            progress.lines += batch.count
            (progress.bytes, progress.digest) = (reader.bytes, reader.digest)
            try report(told, progress)
        }
        return progress
    }
}

/// Reads lines from a file or pipe in chunks, hashing every byte it reads so a progress record
/// can say which input it covers; a line longer than ``GrantImport/maximumLineBytes`` is
/// passed over, only its start kept.
struct LineReader {
    private let handle: FileHandle
    private var buffer: [UInt8] = []
    private var position = 0
    private var ended = false
    private var hash = SHA256()
    /// Bytes read so far (whole lines).
    private(set) var bytes = 0

    init(_ handle: FileHandle) { self.handle = handle }

    /// SHA-256 (hex) of the bytes read so far.
    var digest: String { hash.finalize().map { String(format: "%02x", $0) }.joined() }

    private mutating func fill() throws -> Bool {
        guard !ended else { return false }
        guard let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty else {
            ended = true
            return false
        }
        buffer.removeFirst(position)
        position = 0
        buffer.append(contentsOf: chunk)
        return true
    }

    private mutating func take(upTo end: Int) {
        hash.update(data: buffer[position..<end])
        bytes += end - position
        position = end
    }

    /// Passes over the first `count` bytes (what an earlier run took in) and returns how many
    /// newlines they hold.
    mutating func skip(_ count: Int) throws -> Int {
        var lines = 0
        while bytes < count {
            if position == buffer.count, try !fill() { break }
            let end = min(buffer.count, position + count - bytes)
            lines += buffer[position..<end].count { $0 == 0x0A }
            take(upTo: end)
        }
        return lines
    }

    /// The next line without its newline (cut at the limit plus one byte when longer); nil at the end.
    mutating func next() throws -> [UInt8]? {
        var line: [UInt8] = []
        var started = false
        while true {
            if position == buffer.count, try !fill() {
                return started ? line : nil
            }
            started = true
            let newline = buffer[position...].firstIndex(of: 0x0A)
            let end = newline ?? buffer.count
            if line.count <= GrantImport.maximumLineBytes {
                line.append(contentsOf: buffer[position..<end].prefix(GrantImport.maximumLineBytes + 1 - line.count))
            }
            take(upTo: newline.map { $0 + 1 } ?? end)
            if newline != nil { return line }
        }
    }
}
