import AppleSignIn
import AsyncHTTPClient
import Crypto
import Foundation
import Hummingbird
import NIOCore
import NIOFoundationCompat
import NIOHTTP1
import ProviderSandbox

/// `/sandbox/notifications`: Apple's server-to-server notifications, sent to a receiver as
/// Apple sends them, or broken in the ways a receiver must refuse.
extension AppleSandbox {
    func sendNotification(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let body = try await request.decode(as: SandboxAdmin.Notification.self, context: context)
        let jti = "sbx" + SandboxRandom.hex().prefix(24)
        let payload = try await notificationJWS(body, jti: jti, now: clock.now)
        if AppleNotificationType(rawValue: body.type)?.endsGrants == true, (body.variant ?? .genuine) == .genuine {
            // What the user did at Apple happens whether or not the receiver listens.
            await state.userEndedGrants(clientID: body.clientID, subject: body.subject)
        }
        let message = try JSONSerialization.data(withJSONObject: ["payload": payload])
        await notifications.remember(jti, message: message, url: body.url)
        return Self.json(try await Self.post(message, to: body.url, jti: jti))
    }

    func replayNotification(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let body = try await request.decode(as: SandboxAdmin.Replay.self, context: context)
        guard let sent = await notifications.sent(body.jti) else { throw HTTPError(.notFound, message: "no notification with this jti was sent") }
        return Self.json(try await Self.post(sent.message, to: body.url ?? sent.url, jti: body.jti))
    }

    /// The JWS Apple would send, or the variant asked for.
    func notificationJWS(_ body: SandboxAdmin.Notification, jti: String, now: Date) async throws -> String {
        let variant = body.variant ?? .genuine
        var event: [String: Any] = ["type": body.type, "sub": body.subject, "event_time": Int64(now.timeIntervalSince1970 * 1000)]
        if let email = body.email { event["email"] = email }
        if let isPrivateEmail = body.isPrivateEmail { event["is_private_email"] = isPrivateEmail ? "true" : "false" }
        let eventText = String(decoding: try JSONSerialization.data(withJSONObject: event, options: [.sortedKeys]), as: UTF8.self)
        let issuedAt = Int64(now.timeIntervalSince1970)
        var claims: [String: Any] = [
            "iss": AppleIdentityClaims.appleIssuer, "aud": body.clientID, "iat": issuedAt, "jti": jti, "events": eventText,
        ]
        switch variant {
        case .genuine, .forged, .unknownKey, .algorithmNone, .hmacWithPublicKey: break
        case .criticalHeader, .paddedSignature, .trailingPeriod, .nonCanonicalSignature: break
        case .expired:
            claims["iat"] = issuedAt - 2 * 86_400
            claims["exp"] = issuedAt - 3600
        case .issuedInFuture: claims["iat"] = issuedAt + 3600
        case .wrongAudience: claims["aud"] = body.clientID + ".other"
        case .wrongIssuer: claims["iss"] = "https://account.apple.com"
        case .malformedEvents: claims["events"] = event
        }
        let signature: SandboxSigningKeys.Signature =
            switch variant {
            case .forged: .forged
            case .unknownKey: .unknownKey
            case .algorithmNone: .algorithmNone
            case .hmacWithPublicKey: .hmacWithPublicKey
            default: variant.bend.map { .bent($0) } ?? .genuine
            }
        return try await identityTokens.sign(claims: claims, signature)
    }

    static func post(_ message: Data, to url: String, jti: String) async throws -> SandboxAdmin.NotificationDelivery {
        let (status, body) = try await SentMessages.push(message, to: url, contentType: "application/json", userAgent: "AppleSignInSandbox")
        return SandboxAdmin.NotificationDelivery(jti: jti, status: status, body: body)
    }
}
