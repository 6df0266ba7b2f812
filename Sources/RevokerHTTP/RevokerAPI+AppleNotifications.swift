import AppleSignIn
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RevokerStore

/// `POST /v1/apple/notifications`: Apple's server-to-server notifications for Sign in with Apple.
///
/// Apple cannot send an API key: the JWS's signature, checked completely by
/// ``AppleNotificationVerifier``, is the authentication. 200 is answered only once the
/// notification is committed (a replayed `jti` is 200 and changes nothing); anything that does
/// not verify is 400 with a problem that names what is wrong and repeats nothing of the token;
/// a database or key-fetch failure is 503, so that a retrying sender tries again.
extension RevokerAPI {
    /// Apple's bodies are a few kilobytes.
    static let maximumNotificationBytes = 16 * 1024

    /// Receives one notification; `clientID` when it arrived at an app's own URL.
    func receiveAppleNotification(_ request: Request, context: APIRequestContext, clientID: String?) async throws -> Response {
        guard let verifier = appleNotifications else {
            throw APIProblem.notFound("Apple's notifications are not received here.")
        }
        // An unknown client_id in the URL is not refused before verifying: that would tell
        // anyone which bundle ids are configured. The verifier refuses it as it refuses a
        // notification for another app (`wrong_audience`), after the same checks.
        let payload: String
        do {
            payload = try await Self.notificationPayload(request)
        } catch let problem as APIProblem {
            metrics.notification("malformed_body")
            throw problem
        }
        let notification: AppleNotification
        do {
            notification = try await verifier.verify(payload, clientID: clientID)
        } catch let error as AppleSignInError {
            metrics.notification(error.code.description)
            context.logger.notice("Refused a notification that does not verify", metadata: ["revoker.error": "\(error.code)"])
            throw APIProblem.badRequest(error.message, field: "payload")
        } catch {
            // Apple's keys could not be fetched: not the sender's fault.
            metrics.notification("keys_unavailable")
            context.logger.warning("Could not fetch Apple's keys to verify a notification")
            var problem = APIProblem(.serviceUnavailable, "Apple's signing keys cannot be fetched right now; try again shortly.")
            problem.headers[.retryAfter] = "5"
            throw problem
        }
        let received = ReceivedNotification(
            id: notification.id,
            clientID: notification.clientID,
            type: notification.type.rawValue,
            typeAsSent: notification.typeAsSent,
            userID: notification.userID,
            eventTime: notification.eventTime,
            issuedAt: notification.issuedAt,
            expiresAt: notification.expires,
            issuer: notification.issuer,
            keyID: notification.keyID,
            hadEmail: notification.email != nil,
            isPrivateEmail: notification.isPrivateEmail
        )
        let receipt: NotificationReceipt
        do {
            receipt = try await store { [inbox] in try await inbox.receive(received) }
        } catch {
            metrics.notification("unavailable")
            throw error
        }
        let status: String
        switch receipt {
        case .accepted(let ended):
            status = "accepted"
            context.logger.info(
                "Accepted a notification from Apple",
                metadata: [
                    "revoker.client_id": "\(notification.clientID)", "apple.notification.type": "\(notification.type)",
                    "revoker.requests_ended": "\(ended)",
                ]
            )
        case .duplicate:
            status = "duplicate"
            context.logger.debug("A notification arrived again", metadata: ["revoker.client_id": "\(notification.clientID)"])
        }
        metrics.notification(status)
        return try Self.json(["status": status])
    }

    /// The `payload` string of `{"payload": "<JWS>"}`. Other fields are ignored (Apple may add
    /// some); any content type is read, as Apple never retries a refusal.
    static func notificationPayload(_ request: Request) async throws -> String {
        // Oversized is the sender's malformed body here (400), not 413: Apple's bodies are small.
        let bytes = try await JSONInput.body(
            request,
            limit: maximumNotificationBytes,
            tooLarge: APIProblem.badRequest("The notification body is larger than \(maximumNotificationBytes) bytes.")
        )
        let object = try JSONInput.parseObject(bytes)
        guard case .string(let payload) = object["payload"], !payload.isEmpty else {
            throw APIProblem.badRequest("The body must be {\"payload\": \"<JWS>\"}.", field: "payload")
        }
        return payload
    }
}
