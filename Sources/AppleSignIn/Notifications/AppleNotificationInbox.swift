import Foundation
import RevokerProvider

/// `POST /v1/apple/notifications` (and an app's own `…/{client_id}`): Apple's
/// server-to-server notifications for Sign in with Apple, `{"payload": "<JWS>"}`.
///
/// The JWS's signature, checked completely by ``AppleNotificationVerifier``, is the
/// authentication. Apple is answered 200 once the notification is stored; a refusal is the
/// API's own problem naming the field, as Apple never retries one anyway.
public struct AppleNotificationInbox: ProviderInbox {
    /// How the store records them (the audit kind they had before there was one for all).
    public static let source = ProviderMessageSource(
        provider: .apple,
        auditEvent: "apple_notification",
        actor: "apple:notification",
        sender: "Apple"
    )

    /// The app backend's event for a type Apple documents: `apple.consent_revoked`,
    /// `apple.account_deleted`, `apple.email_disabled`, `apple.email_enabled`.
    static func eventType(_ type: AppleNotificationType) -> String {
        type == .accountDeleted ? "apple.account_deleted" : "apple." + type.rawValue.replacingOccurrences(of: "-", with: "_")
    }

    /// Verifies them; nil when they are not received (switched off, or no Apple app).
    let verifier: AppleNotificationVerifier?

    public init(verifier: AppleNotificationVerifier?) {
        self.verifier = verifier
    }

    public var routes: [String] { ["apple/notifications", "apple/notifications/{client_id}"] }
    /// Apple's bodies are a few kilobytes.
    public var maximumBodyBytes: Int { 16 * 1024 }
    public var metricLabel: String { "revoker_apple_notifications_total" }
    public var source: ProviderMessageSource { Self.source }
    public var closedReason: String? { verifier == nil ? "Apple's notifications are not received here." : nil }

    public func receive(_ body: [UInt8], clientID: String?) async throws -> ProviderMessage {
        guard let verifier else { throw InboxRefusal(code: "not_received", message: closedReason ?? "") }
        // Other fields are ignored (Apple may add some); any content type is read.
        let object: [String: JSONValue]
        do {
            object = try StrictJSON.object(body)
        } catch {
            throw InboxRefusal.malformedBody(error.reason)
        }
        guard case .string(let payload) = object["payload"], !payload.isEmpty else {
            throw InboxRefusal.malformedBody("The body must be {\"payload\": \"<JWS>\"}.", field: "payload")
        }
        // An unknown client_id in the URL is not refused before verifying: that would tell
        // anyone which bundle ids are configured. The verifier refuses it as it refuses a
        // notification for another app (`wrong_audience`), after the same checks.
        let notification: AppleNotification
        do {
            notification = try await verifier.verify(payload, clientID: clientID)
        } catch let error as AppleSignInError {
            throw InboxRefusal(code: error.code.description, message: error.message, field: "payload")
        }
        return ProviderMessage(
            id: notification.id,
            clientID: notification.clientID,
            type: notification.type.rawValue,
            userID: notification.userID,
            endsGrants: notification.type.endsGrants,
            endsAccount: notification.type == .accountDeleted,
            eventType: AppleNotificationType.known.contains(notification.type) ? Self.eventType(notification.type) : nil,
            eventTime: notification.eventTime,
            issuedAt: notification.issuedAt,
            issuer: notification.issuer,
            keyID: notification.keyID,
            // The email address Apple may include is not kept (the table is append-only and
            // cannot forget it), only whether one came.
            details: [
                .init("type_as_sent", .text(notification.typeAsSent)),
                .init("expires_at", .time(notification.expires)),
                .init("had_email", .flag(notification.email != nil)),
                .init("is_private_email", .flag(notification.isPrivateEmail)),
            ]
        )
    }

    public func accepted(_ receipt: InboxReceipt) -> InboxAnswer {
        InboxAnswer(
            status: 200,
            contentType: "application/json",
            body: Array("{\"status\":\"\(receipt.duplicate ? "duplicate" : "accepted")\"}".utf8)
        )
    }

    public func refused(_ refusal: InboxRefusal) -> InboxAnswer? { nil }
}
