import Foundation
import RevokerProvider

/// `POST /v1/google/risc`: Google's Cross-Account Protection pushes security event tokens here
/// (RFC 8935: the body is the token, `application/secevent+jwt`).
///
/// The token's signature, checked completely by ``GoogleSecurityEventVerifier``, is the
/// authentication. Google is answered 202 once the event is stored; a token that does not
/// verify is 400 with RFC 8935's `{"err", "description"}`, repeating nothing of the token.
public struct GoogleSecurityEventInbox: ProviderInbox {
    /// How the store records them (the audit kind they had before there was one for all).
    public static let source = ProviderMessageSource(
        provider: .google,
        auditEvent: "google_security_event",
        actor: "google:risc",
        sender: "Google"
    )

    /// The app backend's event for a type Google documents: `google.tokens_revoked`, ….
    static func eventType(_ kind: GoogleSecurityEvent.Kind) -> String {
        "google." + kind.rawValue.replacingOccurrences(of: "-", with: "_")
    }

    /// Verifies them; nil when no Google app is configured.
    let verifier: GoogleSecurityEventVerifier?

    public init(verifier: GoogleSecurityEventVerifier?) {
        self.verifier = verifier
    }

    public var routes: [String] { ["google/risc"] }
    /// Security event tokens are a few kilobytes.
    public var maximumBodyBytes: Int { 16 * 1024 }
    public var metricLabel: String { "revoker_google_security_events_total" }
    public var source: ProviderMessageSource { Self.source }
    public var closedReason: String? {
        verifier == nil ? "Google's security events are not received here: no Google app is configured." : nil
    }

    public func receive(_ body: [UInt8], clientID: String?) async throws -> ProviderMessage {
        guard let verifier else { throw InboxRefusal(code: "not_received", message: closedReason ?? "") }
        let event: GoogleSecurityEvent
        do {
            // The body is the token, byte for byte (RFC 8935): nothing around it is trimmed.
            event = try await verifier.verify(String(decoding: body, as: UTF8.self))
        } catch let error as GoogleSignInError {
            throw InboxRefusal(code: error.code.rawValue, message: error.message)
        }
        return ProviderMessage(
            id: event.id,
            clientID: event.clientID,
            type: event.type,
            userID: event.googleUserID,
            // A token's hash names no user: there is nothing of the user's to end.
            endsGrants: event.googleUserID != nil && event.kind?.endsGrants == true,
            endsAccount: event.googleUserID != nil && event.kind == .accountPurged,
            eventType: event.kind.map(Self.eventType),
            issuedAt: event.issuedAt,
            issuer: event.issuer,
            keyID: event.keyID,
            details: [
                .init("audience", .text(event.audience)),
                .init("type_uri", .text(event.typeURI)),
                .init("reason", .text(event.reason)),
            ]
        )
    }

    public func accepted(_: InboxReceipt) -> InboxAnswer { InboxAnswer(status: 202) }

    /// RFC 8935's error body: `invalid_issuer`, `invalid_audience`, `invalid_key` (the signature
    /// or the key), or `invalid_request`, with a description that repeats nothing of the token.
    public func refused(_ refusal: InboxRefusal) -> InboxAnswer? {
        let code: String =
            switch GoogleSignInError.Code(rawValue: refusal.code) {
            case .wrongIssuer: "invalid_issuer"
            case .wrongAudience: "invalid_audience"
            case .unknownSigningKey, .invalidSignature, .unsupportedAlgorithm: "invalid_key"
            default: "invalid_request"
            }
        let body = (try? JSONSerialization.data(withJSONObject: ["err": code, "description": refusal.message], options: [.sortedKeys])) ?? Data()
        return InboxAnswer(status: 400, contentType: "application/json", body: Array(body))
    }
}
