import Foundation
import GoogleSignIn
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import RevokerStore

/// `POST /v1/google/risc`: Google's Cross-Account Protection pushes security event tokens here
/// (RFC 8935: the body is the token, `application/secevent+jwt`).
///
/// Google sends no API key: the token's signature, checked completely by
/// ``GoogleSecurityEventVerifier``, is the authentication. 202 is answered only once the event
/// is committed (a replayed `jti` is 202 and changes nothing); a token that does not verify is
/// 400 with RFC 8935's `{"err", "description"}`, repeating nothing of the token; a database or
/// key-fetch failure is 503, and Google delivers again.
extension RevokerAPI {
    /// Security event tokens are a few kilobytes.
    static let maximumSecurityEventBytes = 16 * 1024

    func receiveGoogleSecurityEvent(_ request: Request, context: APIRequestContext) async throws -> Response {
        guard let verifier = googleSecurityEvents else {
            throw APIProblem.notFound("Google's security events are not received here: no Google app is configured.")
        }
        // The body is read apart from verifying: broken framing (400) or a body too slow (408)
        // is the sender's doing, never a key-fetch failure.
        let limit = Self.maximumSecurityEventBytes
        let bytes: [UInt8]
        do {
            bytes = try await JSONInput.body(request, limit: limit, tooLarge: APIProblem.badRequest("larger than \(limit) bytes"))
        } catch let problem as APIProblem where problem.status == .badRequest {
            metrics.securityEvent("malformed_body")
            return try Self.setError(GoogleSignInError(.malformedSecurityEvent, "The body is \(problem.detail)."))
        }
        let event: GoogleSecurityEvent
        do {
            // The body is the token, byte for byte (RFC 8935): nothing around it is trimmed.
            event = try await verifier.verify(String(decoding: bytes, as: UTF8.self))
        } catch let error as GoogleSignInError {
            metrics.securityEvent(error.code.rawValue)
            context.logger.notice("Refused a security event token that does not verify", metadata: ["revoker.error": "\(error.code)"])
            return try Self.setError(error)
        } catch {
            metrics.securityEvent("keys_unavailable")
            context.logger.warning("Could not fetch Google's keys to verify a security event token")
            var problem = APIProblem(.serviceUnavailable, "Google's signing keys cannot be fetched right now; try again shortly.")
            problem.headers[.retryAfter] = "5"
            throw problem
        }
        let received = ReceivedSecurityEvent(
            id: event.id,
            clientID: event.clientID,
            audience: event.audience,
            type: event.type,
            typeURI: event.typeURI,
            googleUserID: event.googleUserID,
            reason: event.reason,
            issuedAt: event.issuedAt,
            issuer: event.issuer,
            keyID: event.keyID
        )
        let receipt: NotificationReceipt
        do {
            receipt = try await store { [securityEvents] in try await securityEvents.receive(received) }
        } catch {
            metrics.securityEvent("unavailable")
            throw error
        }
        switch receipt {
        case .accepted(let ended):
            metrics.securityEvent("accepted")
            context.logger.info(
                "Accepted a security event from Google",
                metadata: [
                    "google.client_id": "\(event.clientID)", "google.security_event.type": "\(event.type)",
                    "revoker.requests_ended": "\(ended)",
                ]
            )
        case .duplicate:
            metrics.securityEvent("duplicate")
            context.logger.debug("A security event arrived again", metadata: ["google.client_id": "\(event.clientID)"])
        }
        return Response(status: .accepted)
    }

    /// RFC 8935's error body: `invalid_issuer`, `invalid_audience`, `invalid_key` (the signature
    /// or the key), or `invalid_request`, with a description that repeats nothing of the token.
    static func setError(_ error: GoogleSignInError) throws -> Response {
        let code: String =
            switch error.code {
            case .wrongIssuer: "invalid_issuer"
            case .wrongAudience: "invalid_audience"
            case .unknownSigningKey, .invalidSignature, .unsupportedAlgorithm: "invalid_key"
            default: "invalid_request"
            }
        let body = try JSONSerialization.data(withJSONObject: ["err": code, "description": error.message], options: [.sortedKeys])
        return Response(
            status: .badRequest,
            headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: body))
        )
    }
}
