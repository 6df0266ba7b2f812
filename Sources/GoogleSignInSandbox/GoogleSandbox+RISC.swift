import AsyncHTTPClient
import Foundation
import GoogleSignIn
import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox

extension GoogleSandboxAdmin {
    /// `POST /sandbox/risc`: Cross-Account Protection tells a receiver what happened to a Google
    /// account. The sandbox signs a security event token with its key and POSTs it to `url` as
    /// Google does (`application/secevent+jwt`); a `variant` other than `genuine` sends one a
    /// correct receiver refuses.
    public struct SecurityEvent: Codable, Sendable {
        enum CodingKeys: String, CodingKey {
            case url, audience, subject, type, reason, state, variant
        }
        public var url: String
        /// The client ID it is addressed to (`aud`).
        public var audience: String
        /// The Google user id; ignored for `verification` and `token-revoked`.
        public var subject: String
        /// The type's last URI segment: `tokens-revoked`, `account-purged`, `verification`, …
        public var type: String
        public var reason: String?
        /// `verification` only.
        public var state: String?
        public var variant: Variant?

        public init(
            url: String,
            audience: String,
            subject: String,
            type: String,
            reason: String? = nil,
            state: String? = nil,
            variant: Variant? = nil
        ) {
            self.url = url
            self.audience = audience
            self.subject = subject
            self.type = type
            self.reason = reason
            self.state = state
            self.variant = variant
        }
    }

    /// How a security event token is bent.
    public enum Variant: String, Codable, Sendable, CaseIterable {
        case genuine
        case forged
        case unknownKey = "unknown_kid"
        case algorithmNone = "alg_none"
        case hmacWithPublicKey = "hs256_public_key"
        case wrongAudience = "wrong_aud"
        case wrongIssuer = "wrong_iss"
        case issuedInFuture = "future_iat"
        case tooOld = "old_iat"
        /// Two events in one token.
        case twoEvents = "two_events"
        /// A subject that is not an iss-sub.
        case malformedSubject = "malformed_subject"
        /// A `crit` header parameter (``SandboxTokenBend``).
        case criticalHeader = "crit_header"
        /// `==` after the signature.
        case paddedSignature = "padded_signature"
        /// A period after the signature.
        case trailingPeriod = "trailing_period"
        /// The signature's last character with its unused bits set.
        case nonCanonicalSignature = "noncanonical_signature"

        /// The bend of a bent variant.
        var bend: SandboxTokenBend? { SandboxTokenBend(rawValue: rawValue) }
    }

    /// `POST /sandbox/risc/replay`: sends a token sent before again, byte for byte.
    public struct Replay: Codable, Sendable {
        public var jti: String
        public init(jti: String) { self.jti = jti }
    }

    /// What the receiver answered.
    public struct Delivery: Codable, Sendable {
        public var jti: String
        public var status: Int
        /// The receiver's body (at most 4 KiB).
        public var body: String
    }

    /// Has the sandbox push a security event token; returns what the receiver answered.
    public func sendSecurityEvent(_ event: SecurityEvent) async throws -> Delivery {
        try await transport.decode(transport.send(.POST, "/sandbox/risc", body: event))
    }

    /// Pushes a token sent before again.
    public func replaySecurityEvent(jti: String) async throws -> Delivery {
        try await transport.decode(transport.send(.POST, "/sandbox/risc/replay", body: Replay(jti: jti)))
    }
}

/// Cross-Account Protection: the discovery document and the pushes.
extension GoogleSandbox {
    static let riscIssuer = "https://accounts.google.com/"

    func addRISCRoutes(to group: RouterGroup<SandboxRequestContext>, admin: RouterGroup<SandboxRequestContext>) {
        group.get(".well-known/risc-configuration") { request, context in
            if let answer = try await self.injectKeyFault(.riscConfiguration, context: context) { return answer }
            await self.state.record(endpoint: GoogleEndpoint.riscConfiguration.rawValue, status: 200, error: nil, grantID: nil, now: self.clock.now)
            // The keys are this sandbox's own certs, wherever and however it is served (HTTP/2
            // carries the scheme; HTTP/1.1 reaches the sandbox in plain text).
            let host = request.head.authority ?? "127.0.0.1"
            let base = "\(request.head.scheme ?? "http")://\(host)\(request.uri.path.dropLast(GoogleEndpoint.riscConfiguration.rawValue.count))"
            var response = SandboxJSON.response([
                "issuer": Self.riscIssuer, "jwks_uri": base + GoogleEndpoint.certs.rawValue,
                "delivery_methods_supported": "https://schemas.openid.net/secevent/risc/delivery-method/push",
            ])
            response.headers[.cacheControl] = self.cacheControl
            return response
        }
        admin.post("risc") { request, context in
            let body = try await request.decode(as: GoogleSandboxAdmin.SecurityEvent.self, context: context)
            guard GoogleSecurityEvent.Kind(rawValue: body.type) != nil else {
                throw HTTPError(.badRequest, message: "type must be one of Google's event types")
            }
            let jti = "sbx" + SandboxRandom.hex().prefix(24)
            let token = try await self.securityEventToken(body, jti: jti, now: self.clock.now)
            if GoogleSecurityEvent.Kind(rawValue: body.type)?.endsGrants == true, (body.variant ?? .genuine) == .genuine {
                // What the user did at Google happens whether or not the receiver listens.
                await self.state.userEndedGrants(subject: body.subject, clientID: nil)
            }
            await self.sent.remember(jti, message: Data(token.utf8), url: body.url)
            return SandboxJSON.response(try await Self.push(Data(token.utf8), to: body.url, jti: jti))
        }
        admin.post("risc/replay") { request, context in
            let body = try await request.decode(as: GoogleSandboxAdmin.Replay.self, context: context)
            guard let sent = await self.sent.sent(body.jti) else { throw HTTPError(.notFound, message: "no token with this jti was sent") }
            return SandboxJSON.response(try await Self.push(sent.message, to: sent.url, jti: body.jti))
        }
    }

    /// The token Google would send, or the variant asked for.
    func securityEventToken(_ body: GoogleSandboxAdmin.SecurityEvent, jti: String, now: Date) async throws -> String {
        let variant = body.variant ?? .genuine
        let prefix =
            body.type.hasPrefix("token")
            ? "https://schemas.openid.net/secevent/oauth/event-type/" : "https://schemas.openid.net/secevent/risc/event-type/"
        var event: [String: Any] = [:]
        switch body.type {
        case "verification": event["state"] = body.state ?? ""
        case "token-revoked":
            event["subject"] = [
                "subject_type": "oauth_token", "token_type": "refresh_token", "token_identifier_alg": "hash_base64_sha512_sha512",
                "token": SandboxRandom.hex(),
            ]
        default:
            event["subject"] =
                variant == .malformedSubject
                ? ["subject_type": "email", "email": "user@example.com"] : ["subject_type": "iss-sub", "iss": Self.riscIssuer, "sub": body.subject]
        }
        if let reason = body.reason { event["reason"] = reason }
        var events: [String: Any] = [prefix + body.type: event]
        if variant == .twoEvents { events[prefix + "sessions-revoked"] = event }
        let issuedAt = Int64(now.timeIntervalSince1970)
        var claims: [String: Any] = ["iss": Self.riscIssuer, "aud": body.audience, "iat": issuedAt, "jti": jti, "events": events]
        switch variant {
        case .wrongAudience: claims["aud"] = "9999-other.apps.googleusercontent.com"
        case .wrongIssuer: claims["iss"] = "https://accounts.google.com.evil.example/"
        case .issuedInFuture: claims["iat"] = issuedAt + 3600
        case .tooOld: claims["iat"] = issuedAt - 30 * 86_400
        default: break
        }
        let signature: SandboxSigningKeys.Signature =
            switch variant {
            case .forged: .forged
            case .unknownKey: .unknownKey
            case .algorithmNone: .algorithmNone
            case .hmacWithPublicKey: .hmacWithPublicKey
            default: variant.bend.map { .bent($0) } ?? .genuine
            }
        return try await keys.sign(claims: claims, header: ["typ": "secevent+jwt"], signature)
    }

    static func push(_ token: Data, to url: String, jti: String) async throws -> GoogleSandboxAdmin.Delivery {
        let (status, body) = try await SentMessages.push(token, to: url, contentType: "application/secevent+jwt", userAgent: "GoogleSignInSandbox")
        return GoogleSandboxAdmin.Delivery(jti: jti, status: status, body: body)
    }
}
