import Foundation
import JWTKit
import RevokerProvider

/// Verifies Apple's server-to-server notifications completely: the signature with Apple's key
/// named by `kid` (RS256 only), then `iss` against a configured set, `aud` against the
/// configured apps, `iat` and `exp` against the clock, `jti`, and the `events` claim's shape.
///
/// The issuer is pinned, never read from Apple's discovery document: in June 2025 that
/// document briefly named another issuer while tokens kept `https://appleid.apple.com`.
public struct AppleNotificationVerifier: Sendable {
    /// What a notification must satisfy.
    public struct Settings: Sendable, Equatable {
        /// Accepted `iss` values.
        public var issuers: Set<String>
        /// The apps notifications may be addressed to (`aud`).
        public var clientIDs: Set<String>
        /// How far in the future `iat` may lie, and how far past `exp` is still accepted.
        public var clockSkew: Duration
        /// How long ago `iat` may lie: Apple delivers at once and never retries, so an old
        /// notification is a replay.
        public var maximumAge: Duration

        public init(
            issuers: Set<String> = [AppleIdentityClaims.appleIssuer],
            clientIDs: Set<String>,
            clockSkew: Duration = .seconds(60),
            maximumAge: Duration = .seconds(86_400)
        ) {
            self.issuers = issuers
            self.clientIDs = clientIDs
            self.clockSkew = clockSkew
            self.maximumAge = maximumAge
        }
    }

    public let keys: AppleKeySet
    public let settings: Settings

    public init(keys: AppleKeySet, settings: Settings) {
        self.keys = keys
        self.settings = settings
    }

    /// Verifies the JWS of a notification's `payload` field.
    ///
    /// - Parameter clientID: when the notification arrived at an app's own URL, the app it
    ///   must be addressed to.
    /// - Throws: ``AppleSignInError`` naming what is wrong (never echoing the token), or
    ///   ``AppleAPIError`` when Apple's keys cannot be fetched.
    public func verify(_ payload: String, clientID: String? = nil, now: Date = Date()) async throws -> AppleNotification {
        let (keyID, verified) = try await keys.verifySignature(payload, as: NotificationClaims.self, of: .notification, from: .outside)
        let claims = verified.values

        guard case .string(let issuer) = claims["iss"] else { throw Self.malformed("has no issuer (iss)") }
        guard settings.issuers.contains(issuer) else {
            throw AppleSignInError(.wrongIssuer, "The notification was not issued by an accepted issuer.")
        }
        let audiences: [String]
        switch claims["aud"] {
        case .string(let value): audiences = [value]
        case .strings(let values): audiences = values
        default: throw Self.malformed("has no audience (aud)")
        }
        let wanted = clientID.map { [$0] } ?? audiences
        guard let audience = wanted.first(where: { audiences.contains($0) && settings.clientIDs.contains($0) }) else {
            throw AppleSignInError(
                .wrongAudience,
                clientID == nil
                    ? "The notification is addressed to an app this service is not configured for."
                    : "The notification is addressed to another app than this URL's."
            )
        }
        guard case .number(let iat) = claims["iat"] else { throw Self.malformed("has no issue time (iat)") }
        let issuedAt = Date(timeIntervalSince1970: iat)
        let skew = settings.clockSkew.timeInterval
        guard issuedAt <= now.addingTimeInterval(skew) else {
            throw AppleSignInError(.issuedInFuture, "The notification's issue time (iat) lies in the future.")
        }
        guard issuedAt >= now.addingTimeInterval(-settings.maximumAge.timeInterval) else {
            throw AppleSignInError(.expiredNotification, "The notification was issued too long ago (iat).")
        }
        var expires: Date?
        switch claims["exp"] {
        case nil: break
        case .number(let exp):
            expires = Date(timeIntervalSince1970: exp)
            guard Date(timeIntervalSince1970: exp + skew) > now else {
                throw AppleSignInError(.expiredNotification, "The notification has expired (exp).")
            }
        default: throw Self.malformed("has an expiry (exp) that is not a number")
        }
        guard case .string(let jti) = claims["jti"], (1...255).contains(jti.unicodeScalars.count), Self.isPrintable(jti) else {
            throw Self.malformed("has no usable id (jti)")
        }
        guard case .string(let eventsText) = claims["events"] else {
            throw Self.malformed("has no events claim holding a JSON string")
        }
        let event = try Self.event(eventsText)
        return AppleNotification(
            id: jti,
            clientID: audience,
            issuer: issuer,
            issuedAt: issuedAt,
            expires: expires,
            keyID: keyID,
            type: event.type,
            typeAsSent: event.typeAsSent,
            userID: event.subject,
            eventTime: event.time,
            email: event.email,
            isPrivateEmail: event.isPrivateEmail
        )
    }

    struct Event {
        var type: AppleNotificationType
        var typeAsSent: String
        var subject: String
        var time: Date
        var email: String?
        var isPrivateEmail: Bool?
    }

    /// The `events` claim: a JSON object in a string.
    static func event(_ text: String) throws -> Event {
        guard let fields = try? JSONDecoder().decode([String: ClaimValue].self, from: Data(text.utf8)) else {
            throw malformed("has an events claim that is not a JSON object")
        }
        guard case .string(let typeText) = fields["type"], let type = AppleNotificationType(rawValue: typeText) else {
            throw malformed("has an event without a well-formed type")
        }
        guard case .string(let subject) = fields["sub"], (1...255).contains(subject.unicodeScalars.count), isPrintable(subject) else {
            throw malformed("has an event without a usable Apple user id (sub)")
        }
        guard case .number(let rawTime) = fields["event_time"], rawTime > 0 else {
            throw malformed("has an event without an event_time")
        }
        // Apple documents milliseconds, and some of its examples show seconds: below 10^11
        // (in 1973 as milliseconds, in 5138 as seconds) it is read as seconds.
        let time = Date(timeIntervalSince1970: rawTime < 100_000_000_000 ? rawTime : rawTime / 1000)
        var email: String?
        switch fields["email"] {
        case nil: break
        case .string(let value) where value.count <= 320 && isPrintable(value): email = value
        default: throw malformed("has an event whose email is not a usable address")
        }
        var isPrivateEmail: Bool?
        switch fields["is_private_email"] {
        case nil: break
        case .bool(let value): isPrivateEmail = value
        case .string("true"): isPrivateEmail = true
        case .string("false"): isPrivateEmail = false
        default: throw malformed("has an event whose is_private_email is neither a boolean nor \"true\"/\"false\"")
        }
        return Event(type: type, typeAsSent: typeText, subject: subject, time: time, email: email, isPrivateEmail: isPrivateEmail)
    }

    static func isPrintable(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7F }
    }

    static func malformed(_ what: String) -> AppleSignInError {
        AppleSignInError(.malformedNotification, "The notification \(what).")
    }
}

/// A notification's claims as sent, each checked by the verifier (JWTKit checks none).
struct NotificationClaims: JWTPayload {
    let values: [String: ClaimValue]

    init(from decoder: any Decoder) throws {
        values = try decoder.singleValueContainer().decode([String: ClaimValue].self)
    }

    func encode(to encoder: any Encoder) throws {}
    func verify(using _: some JWTAlgorithm) {}
}

/// A claim's value as far as the verifier cares: JSON strings, numbers and booleans are told
/// apart (a number is never read as a boolean or the other way round).
enum ClaimValue: Decodable, Equatable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case strings([String])
    case other

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([String].self) {
            self = .strings(value)
        } else {
            self = .other
        }
    }
}
