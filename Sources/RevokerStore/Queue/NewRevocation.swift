import Foundation

/// A request to revoke a sign-in grant, as handed to ``RevocationQueue/enqueue(_:actor:)``.
///
/// Its rules live here and nowhere else: the HTTP API, the command line and the Swift API all
/// build one, so a value that exists is valid. `revoker.enqueue_revocation` (migration 0003)
/// enforces the same limits for the SQL path.
public struct NewRevocation: Sendable, CustomStringConvertible {
    /// The sign-in provider that issued the grant (`apple` unless named).
    public let provider: String
    /// The app's `client_id` at its provider (Apple's Services ID or bundle id, Google's OAuth client ID).
    public let clientID: String
    /// The caller's reference (e.g. its user id); idempotency key together with `clientID`.
    public let externalReference: String
    /// The user's id at the provider (`sub`), when known; a mismatching id_token then stops
    /// the request. Named for Apple, the first provider, and kept so for every caller.
    public let userID: String?
    /// Whether ``userID`` is the `sub` of an identity token Revoker verified at enqueue
    /// (the `enqueued` audit row says so).
    public let userFromIdentityToken: Bool
    /// The credential to revoke.
    public let credential: Credential
    /// The redirect URI an authorization code was issued for, if any.
    public let redirectURI: String?
    /// Attempts before the request fails as `exhausted`.
    public let maxAttempts: Int

    /// Characters of `client_id`, `external_reference` and `apple_user_id`, counted as Unicode
    /// code points: what PostgreSQL's `char_length` and JSON Schema's `maxLength` count (a
    /// run of combining marks is one Swift `Character` but many code points).
    public static let identifierLength = 1...255
    /// Code points of `redirect_uri`.
    public static let redirectURILength = 1...2048
    /// Bytes of a code or token.
    public static let credentialLength = 1...8192
    /// The allowed `max_attempts`.
    public static let maxAttemptsRange = 1...100
    /// `max_attempts` when none is given.
    public static let defaultMaxAttempts = 8
    /// The provider when none is named.
    public static let defaultProvider = "apple"

    /// Checks every rule and creates the value.
    ///
    /// - Throws: ``Invalid`` naming the first field that breaks a rule (never its value).
    public init(
        provider: String = NewRevocation.defaultProvider,
        clientID: String,
        externalReference: String,
        userID: String? = nil,
        userFromIdentityToken: Bool = false,
        credential: Credential,
        redirectURI: String? = nil,
        maxAttempts: Int = NewRevocation.defaultMaxAttempts
    ) throws(Invalid) {
        guard Self.isProviderName(provider) else {
            throw Invalid(.provider, "must be a provider's name: 1 to 32 characters of a-z, 0-9 and _, starting with a letter")
        }
        try Self.checkIdentifier(clientID, .clientID)
        try Self.checkIdentifier(externalReference, .externalReference)
        if let userID { try Self.checkIdentifier(userID, .userID) }
        guard Self.credentialLength.contains(credential.secret.utf8.count),
            credential.secret.utf8.allSatisfy({ (0x21...0x7E).contains($0) })
        else {
            throw Invalid(.credential, "must be \(Self.credentialLength.upperBound) bytes at most of printable ASCII without spaces")
        }
        if let redirectURI {
            guard Self.redirectURILength.contains(redirectURI.unicodeScalars.count), !Self.hasControlCharacters(redirectURI),
                let url = URL(string: redirectURI), ["https", "http"].contains(url.scheme?.lowercased() ?? ""), url.host != nil
            else {
                throw Invalid(.redirectURI, "must be an absolute http(s) URL of at most \(Self.redirectURILength.upperBound) characters")
            }
        }
        guard Self.maxAttemptsRange.contains(maxAttempts) else {
            throw Invalid(.maxAttempts, "must be between \(Self.maxAttemptsRange.lowerBound) and \(Self.maxAttemptsRange.upperBound)")
        }
        self.provider = provider
        self.clientID = clientID
        self.externalReference = externalReference
        self.userID = userID
        self.userFromIdentityToken = userFromIdentityToken && userID != nil
        self.credential = credential
        self.redirectURI = redirectURI
        self.maxAttempts = maxAttempts
    }

    /// The `enqueued` audit row's detail: provider, kind, and where the user id came from.
    var enqueuedDetail: String {
        "provider=\(provider) kind=\(credential.kind.rawValue)" + (userFromIdentityToken ? " user=verified_id_token" : "")
    }

    public var description: String {
        "NewRevocation(provider: \(self.provider), clientID: \(self.clientID), externalReference: \(self.externalReference), kind: \(self.credential.kind))"
    }

    private static func checkIdentifier(_ text: String, _ field: Field) throws(Invalid) {
        guard identifierLength.contains(text.unicodeScalars.count), isVisibleText(text) else {
            throw Invalid(
                field,
                "must be \(identifierLength.lowerBound) to \(identifierLength.upperBound) characters of visible text: no control, invisible or bidirectional characters, no leading or trailing white space"
            )
        }
    }

    /// Characters an identifier must not hold: controls, invisible formatting (zero-width
    /// characters, soft hyphen, BOM), bidirectional overrides and isolates, line and paragraph
    /// separators, interlinear annotations and the private-use area. An explicit list of
    /// characters below U+FFFF, not Unicode's categories, so that it cannot drift with a
    /// Unicode update and reads the same in `revoker.enqueue_revocation` (migration 0003; a
    /// test holds the two equal) and in the OpenAPI document's pattern, whose regular
    /// expressions cannot name characters beyond U+FFFF.
    public static let refusedCharacters: [ClosedRange<UInt32>] = [
        0x00...0x1F, 0x7F...0x9F, 0xAD...0xAD, 0x061C...0x061C, 0x180E...0x180E, 0x200B...0x200F, 0x2028...0x202E,
        0x2060...0x206F, 0xFEFF...0xFEFF, 0xFFF9...0xFFFB, 0xE000...0xF8FF,
    ]
    /// White space an identifier must neither start nor end with (so neither can it be only
    /// white space); the controls among it are refused anywhere.
    public static let edgeWhiteSpace: [ClosedRange<UInt32>] = [
        0x20...0x20, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A, 0x202F...0x202F, 0x205F...0x205F, 0x3000...0x3000,
    ]

    /// Whether `text` is visible text as identifiers must be: see ``refusedCharacters`` and
    /// ``edgeWhiteSpace``.
    public static func isVisibleText(_ text: String) -> Bool {
        let scalars = text.unicodeScalars
        guard let first = scalars.first, let last = scalars.last else { return false }
        func within(_ ranges: [ClosedRange<UInt32>], _ scalar: Unicode.Scalar) -> Bool { ranges.contains { $0.contains(scalar.value) } }
        return !within(edgeWhiteSpace, first) && !within(edgeWhiteSpace, last) && !scalars.contains { within(refusedCharacters, $0) }
    }

    /// The shape migration 0009 checks: `^[a-z][a-z0-9_]{0,31}$`.
    public static func isProviderName(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...32).contains(bytes.count), (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[0]) else { return false }
        return bytes.allSatisfy {
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_")
        }
    }

    private static func hasControlCharacters(_ text: String) -> Bool {
        text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }
}

extension NewRevocation {
    /// A field of a new revocation, by the name the HTTP API and SQL function use.
    public enum Field: String, Sendable, CaseIterable {
        case provider
        case clientID = "client_id"
        case externalReference = "external_reference"
        case userID = "apple_user_id"
        case credential
        case redirectURI = "redirect_uri"
        case maxAttempts = "max_attempts"
    }

    /// A rule a new revocation broke: the field and the rule, never the value (it may be a token).
    public struct Invalid: Error, Sendable, Equatable, CustomStringConvertible {
        /// The field that breaks the rule.
        public let field: Field
        /// The rule, as a predicate: "must be …".
        public let rule: String

        init(_ field: Field, _ rule: String) {
            self.field = field
            self.rule = rule
        }

        public var description: String { "\(field.rawValue) \(rule)" }
    }
}
