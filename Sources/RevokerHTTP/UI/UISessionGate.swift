import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import RevokerStore

/// Who is looking at a compliance page: their session and what their API key reaches.
struct UIVisitor: Sendable {
    let session: UISession
    let tokenHash: [UInt8]
    let caller: APICaller
}

/// Sessions of the compliance pages. The browser holds a random token in an HttpOnly,
/// SameSite=Strict cookie (Secure and `__Host-` over TLS); the database holds its SHA-256 and
/// the digest of the API key that opened it, never the key. Every form carries a token that a
/// page of the same session (or, for sign-in, the same browser) wrote, and a form whose
/// `Origin` or `Sec-Fetch-Site` names another site is refused.
struct UISessionGate: Sendable {
    let settings: UISettings
    let keys: APIKeys
    let sessions: UISessions
    let databaseTimeout: Duration
    /// Failed sign-ins per client address.
    let throttle = SignInThrottle()

    var sessionCookieName: String { settings.isSecure ? "__Host-revoker_session" : "revoker_session" }
    var signInCookieName: String { settings.isSecure ? "__Host-revoker_sign_in" : "revoker_sign_in" }

    func sessionCookie(_ value: String, maxAge: Int) -> Cookie {
        Cookie(name: sessionCookieName, value: value, maxAge: maxAge, path: "/", secure: settings.isSecure, httpOnly: true, sameSite: .strict)
    }

    func signInCookie(_ value: String, maxAge: Int = 900) -> Cookie {
        Cookie(name: signInCookieName, value: value, maxAge: maxAge, path: "/", secure: settings.isSecure, httpOnly: true, sameSite: .strict)
    }

    /// 256 random bits, base64url without padding.
    static func randomToken() -> String {
        let bytes = SymmetricKey(size: .bits256).withUnsafeBytes { Data($0) }
        return bytes.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func hash(_ token: String) -> [UInt8] { Array(SHA256.hash(data: Array(token.utf8))) }

    /// The visitor of a live session whose key is still configured with `audit:read`; nil
    /// otherwise (a session of a key since removed or narrowed is closed).
    func session(_ request: Request) async throws -> UIVisitor? {
        guard let token = request.cookies[sessionCookieName]?.value, token.utf8.count == 43 else { return nil }
        let tokenHash = Self.hash(token)
        let sessions = self.sessions
        let idle = settings.idleTimeout
        guard let session = try await withDeadline(databaseTimeout, { try await sessions.touch(tokenHash: tokenHash, idle: idle) }) else {
            return nil
        }
        guard let key = keys.key(sha256: session.keySHA256), key.name == session.keyName,
            let caller = try? APIKeys.caller(key, .auditRead)
        else {
            try await withDeadline(databaseTimeout) { try await sessions.close(tokenHash: tokenHash) }
            return nil
        }
        return UIVisitor(session: session, tokenHash: tokenHash, caller: caller)
    }

    /// `body` for a signed-in visitor; the sign-in page for anyone else.
    func signedIn(_ request: Request, _ body: (UIVisitor) async throws -> Response) async throws -> Response {
        guard let visitor = try await session(request) else { return .redirect(to: "/ui/sign-in") }
        return try await body(visitor)
    }

    /// Opens a session for `key`; returns the cookie that holds it.
    func open(for key: APIKey) async throws -> Cookie {
        let token = Self.randomToken()
        let session = UISession(
            keyName: key.name,
            keySHA256: key.sha256,
            csrfToken: Self.randomToken(),
            expiresAt: Date().addingTimeInterval(Double(settings.sessionLifetime.components.seconds))
        )
        let sessions = self.sessions
        let lifetime = settings.sessionLifetime
        try await withDeadline(databaseTimeout) {
            try await sessions.open(tokenHash: Self.hash(token), session: session, lifetime: lifetime, actor: "ui:\(key.name)")
        }
        return sessionCookie(token, maxAge: Int(lifetime.components.seconds))
    }

    func close(_ visitor: UIVisitor) async throws {
        let sessions = self.sessions
        let actor = "ui:\(visitor.caller.name)"
        try await withDeadline(databaseTimeout) { try await sessions.close(tokenHash: visitor.tokenHash, actor: actor) }
    }

    /// Refuses a form that a page of another site sent.
    func requireSameOrigin(_ request: Request) throws {
        let refusal = APIProblem(.forbidden, "The form was sent from another site.")
        if let site = request.headers[Self.secFetchSite], site != "same-origin", site != "none" { throw refusal }
        guard let origin = request.headers[.origin] else { return }
        if let publicURL = settings.publicURL {
            guard origin == Self.origin(publicURL) else { throw refusal }
            return
        }
        guard let authority = request.head.authority, origin == "http://\(authority)" || origin == "https://\(authority)" else {
            throw refusal
        }
    }

    static let secFetchSite = HTTPField.Name("Sec-Fetch-Site")!

    /// `scheme://host[:port]` of a URL.
    static func origin(_ url: URL) -> String {
        "\(url.scheme ?? "https")://\(url.host ?? "")" + (url.port.map { ":\($0)" } ?? "")
    }

    /// A posted form (`application/x-www-form-urlencoded`, at most 8 KiB).
    static func form<T: Decodable>(_ request: Request, _ type: T.Type) async throws -> T {
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        guard contentType.hasPrefix("application/x-www-form-urlencoded") else {
            throw APIProblem(.unsupportedMediaType, "Forms are sent as application/x-www-form-urlencoded.")
        }
        let body = try await request.body.collect(upTo: 8192)
        do {
            return try URLEncodedFormDecoder().decode(T.self, from: String(buffer: body))
        } catch {
            throw APIProblem.badRequest("The form could not be read.")
        }
    }
}

struct UISignInForm: Decodable {
    var apiKey: String?
    var csrf: String?

    enum CodingKeys: String, CodingKey {
        case apiKey = "api_key"
        case csrf
    }
}

struct UISignOutForm: Decodable {
    var csrf: String?
}

/// The search form, from the query string of `GET /ui/search`.
struct UISearchForm: Sendable {
    var reference: String?
    var userID: String?
    var clientID: String?
    var outcome: String?
    var fromText: String?
    var toText: String?
    var cursor: String?

    static let outcomes = RevocationOutcome.all.map(\.rawValue) + [AuditRequestSearch.inProgress]

    private struct Query: Decodable {
        var reference: String?
        var userID: String?
        var clientID: String?
        var outcome: String?
        var from: String?
        var to: String?
        var cursor: String?

        enum CodingKeys: String, CodingKey {
            case reference, outcome, from, to, cursor
            case userID = "apple_user_id"
            case clientID = "client_id"
        }
    }

    init(_ request: Request, context: APIRequestContext) throws {
        let query: Query
        do {
            query = try URLEncodedFormDecoder().decode(Query.self, from: request.uri.query ?? "")
        } catch {
            throw APIProblem.badRequest("The search could not be read: use the form.")
        }
        func text(_ value: String?) -> String? {
            let trimmed = value?.trimmingCharacters(in: .whitespaces) ?? ""
            return trimmed.isEmpty ? nil : trimmed
        }
        reference = text(query.reference)
        userID = text(query.userID)
        clientID = text(query.clientID)
        outcome = text(query.outcome)
        fromText = text(query.from)
        toText = text(query.to)
        cursor = text(query.cursor)
    }

    /// The store's search; 400 for a field it cannot take, 403 for an app the key does not reach.
    func search(for caller: APICaller, limit: Int) throws -> AuditRequestSearch {
        for (value, name) in [(reference, "The external reference"), (userID, "The Apple user id"), (clientID, "The app")] {
            if let value, value.unicodeScalars.count > 255 { throw APIProblem.badRequest("\(name) is longer than 255 characters.") }
        }
        if let outcome, !Self.outcomes.contains(outcome) {
            throw APIProblem.badRequest("Unknown outcome; known: \(Self.outcomes.joined(separator: ", ")).")
        }
        let from = try fromText.map { try Self.day($0, "from") }
        let to = try toText.map { try Self.day($0, "until").addingTimeInterval(24 * 3600) }
        if let from, let to, from >= to { throw APIProblem.badRequest("The date range ends before it starts.") }
        if let clientID { try caller.require(clientID) }
        var search = AuditRequestSearch(
            externalReference: reference,
            userID: userID,
            clientID: clientID,
            outcome: outcome,
            from: from,
            to: to,
            cursor: cursor,
            limit: limit
        )
        search.clientIDs = caller.filter
        return search
    }

    /// A `YYYY-MM-DD` date's start, in UTC.
    static func day(_ text: String, _ name: String) throws -> Date {
        let parts = text.split(separator: "-")
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
            let date = DateComponents(calendar: Calendar(identifier: .gregorian), timeZone: .gmt, year: year, month: month, day: day).date,
            Calendar(identifier: .gregorian).dateComponents(in: .gmt, from: date).day == day
        else {
            throw APIProblem.badRequest("The date '\(name)' must be a day such as 2026-01-31.")
        }
        return date
    }

    /// The search as a query string (with `?`), for links to its CSV and its next page.
    func queryString(cursor: String? = nil) -> String {
        let pairs: [(String, String?)] = [
            ("reference", reference), ("apple_user_id", userID), ("client_id", clientID), ("outcome", outcome),
            ("from", fromText), ("to", toText), ("cursor", cursor),
        ]
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let encoded = pairs.compactMap { name, value in
            value.map { "\(name)=\($0.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")" }
        }
        return encoded.isEmpty ? "" : "?" + encoded.joined(separator: "&")
    }
}
