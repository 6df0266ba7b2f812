import Foundation
import JWTKit
import RevokerProvider

/// A verified security event token from Google's Cross-Account Protection (RISC).
public struct GoogleSecurityEvent: Sendable, Equatable {
    /// The event types Google documents, by the last segment of their URI.
    public enum Kind: String, Sendable, CaseIterable {
        case sessionsRevoked = "sessions-revoked"
        case tokensRevoked = "tokens-revoked"
        case tokenRevoked = "token-revoked"
        case accountDisabled = "account-disabled"
        case accountEnabled = "account-enabled"
        case accountPurged = "account-purged"
        case accountCredentialChangeRequired = "account-credential-change-required"
        case verification

        /// The user's grants to the app are gone: every token revoked, or the account deleted.
        public var endsGrants: Bool { self == .tokensRevoked || self == .accountPurged }
    }

    /// The token's `jti`: unique; a replay changes nothing.
    public var id: String
    /// The `aud` it was addressed to (one of the app's client IDs).
    public var audience: String
    /// The configured app that audience belongs to.
    public var clientID: String
    public var issuer: String
    public var issuedAt: Date
    public var keyID: String
    /// The type's last URI segment (`tokens-revoked`); a type Google adds later is kept as sent.
    public var type: String
    /// The event type's URI as sent.
    public var typeURI: String
    /// The Google user id (`sub` of an `iss-sub` subject); nil for `token-revoked` and `verification`.
    public var googleUserID: String?
    /// Why, when Google says (`hijacking`, `bulk-account`).
    public var reason: String?
    /// The `state` of a `verification` event, as `stream:verify` was given it.
    public var state: String?

    /// The documented type, when it is one.
    public var kind: Kind? { Kind(rawValue: type) }
}

/// Verifies Cross-Account Protection's security event tokens completely: the signature with
/// Google's key named by `kid` (RS256 only), `iss` Google's, `aud` one of the configured apps'
/// client IDs, `iat` within bounds, `jti`, and exactly one event of a RISC or OAuth event type
/// with the subject its type needs.
public struct GoogleSecurityEventVerifier: Sendable {
    /// Google's RISC issuer (its discovery document writes it with a slash); the other spelling
    /// is Google's too.
    public static let issuers: Set<String> = ["https://accounts.google.com/", "https://accounts.google.com"]
    static let typePrefixes = ["https://schemas.openid.net/secevent/risc/event-type/", "https://schemas.openid.net/secevent/oauth/event-type/"]

    public let keys: GoogleKeySet
    /// Every accepted audience, and the app (client_id) it belongs to.
    public let audiences: [String: String]
    let clockSkew: TimeInterval
    let maximumAge: TimeInterval

    /// - Parameters:
    ///   - apps: the apps whose client IDs (`audiences`) events may be addressed to.
    ///   - maximumAge: how long ago `iat` may lie; Google retries deliveries, and a `jti` seen
    ///     before is a no-op anyway.
    public init(keys: GoogleKeySet, apps: some Sequence<GoogleApp>, clockSkew: Duration = .seconds(60), maximumAge: Duration = .seconds(7 * 86_400)) {
        self.keys = keys
        var audiences: [String: String] = [:]
        for app in apps {
            for audience in app.audiences where audiences[audience] == nil { audiences[audience] = app.clientID }
        }
        self.audiences = audiences
        self.clockSkew = TimeInterval(clockSkew.components.seconds)
        self.maximumAge = TimeInterval(maximumAge.components.seconds)
    }

    /// Verifies a security event token as it came in a push body.
    ///
    /// - Throws: ``GoogleSignInError`` naming what is wrong (never echoing the token), or a
    ///   ``ProviderFailure`` when Google's keys cannot be fetched.
    public func verify(_ token: String, now: Date = Date()) async throws -> GoogleSecurityEvent {
        let noun = "The security event token"
        let (keyID, claims) = try await keys.verifySignature(
            token,
            as: SecurityEventClaims.self,
            noun: noun,
            malformed: .malformedSecurityEvent,
            from: .outside
        )
        guard case .string(let issuer) = claims.values["iss"], Self.issuers.contains(issuer) else {
            throw GoogleSignInError(.wrongIssuer, "\(noun) was not issued by Google.")
        }
        let sent: [String]
        switch claims.values["aud"] {
        case .string(let value): sent = [value]
        case .array(let values): sent = values.compactMap { if case .string(let value) = $0 { value } else { nil } }
        default: throw Self.malformed("has no audience (aud)")
        }
        guard let audience = sent.first(where: { audiences[$0] != nil }), let clientID = audiences[audience] else {
            throw GoogleSignInError(.wrongAudience, "\(noun) is addressed to a client ID no configured Google app has.")
        }
        guard case .number(let iat) = claims.values["iat"] else { throw Self.malformed("has no issue time (iat)") }
        let issuedAt = Date(timeIntervalSince1970: iat)
        guard issuedAt <= now.addingTimeInterval(clockSkew) else {
            throw GoogleSignInError(.issuedInFuture, "\(noun)'s issue time (iat) lies in the future.")
        }
        guard issuedAt >= now.addingTimeInterval(-maximumAge) else {
            throw GoogleSignInError(.expiredSecurityEvent, "\(noun) was issued too long ago (iat).")
        }
        guard case .string(let jti) = claims.values["jti"], (1...255).contains(jti.unicodeScalars.count), Self.isPrintable(jti) else {
            throw Self.malformed("has no usable id (jti)")
        }
        guard case .object(let events) = claims.values["events"], events.count == 1, let (typeURI, body) = events.first else {
            throw Self.malformed("does not hold exactly one event (events)")
        }
        guard let prefix = Self.typePrefixes.first(where: { typeURI.hasPrefix($0) }) else {
            throw Self.malformed("names an event type that is not a RISC or OAuth event type")
        }
        let type = String(typeURI.dropFirst(prefix.count))
        guard type.range(of: "^[a-z][a-z0-9-]{0,63}$", options: .regularExpression) != nil, case .object(let fields) = body else {
            throw Self.malformed("has an event whose type or body is not well-formed")
        }
        var event = GoogleSecurityEvent(
            id: jti,
            audience: audience,
            clientID: clientID,
            issuer: issuer,
            issuedAt: issuedAt,
            keyID: keyID,
            type: type,
            typeURI: typeURI
        )
        if case .string(let reason) = fields["reason"], reason.count <= 64, Self.isPrintable(reason) { event.reason = reason }
        switch event.kind {
        case .verification:
            guard case .string(let state) = fields["state"], state.count <= 255, Self.isPrintable(state) else {
                throw Self.malformed("is a verification without a usable state")
            }
            event.state = state
        case .tokenRevoked:
            // The subject is a hash of one token, not a user: kept as an event, matched to nothing.
            break
        default:
            guard case .object(let subject) = fields["subject"], case .string("iss-sub") = subject["subject_type"],
                case .string(let subjectIssuer) = subject["iss"], Self.issuers.contains(subjectIssuer),
                case .string(let sub) = subject["sub"], (1...255).contains(sub.unicodeScalars.count), Self.isPrintable(sub)
            else {
                throw Self.malformed("has an event without a Google user as its subject (subject_type iss-sub, iss, sub)")
            }
            event.googleUserID = sub
        }
        return event
    }

    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
    }

    static func malformed(_ what: String) -> GoogleSignInError {
        GoogleSignInError(.malformedSecurityEvent, "The security event token \(what).")
    }
}

/// A security event token's claims as sent, each checked by the verifier (JWTKit checks none).
struct SecurityEventClaims: JWTPayload {
    let values: [String: ClaimValue]

    init(from decoder: any Decoder) throws {
        values = try decoder.singleValueContainer().decode([String: ClaimValue].self)
    }

    func encode(to encoder: any Encoder) throws {}
    func verify(using _: some JWTAlgorithm) {}
}

/// Any JSON value of a claim, with numbers, strings and booleans told apart.
enum ClaimValue: Decodable, Equatable, Sendable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([ClaimValue])
    case object([String: ClaimValue])
    case null

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([ClaimValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: ClaimValue].self))
        }
    }
}
