import Foundation
import RevokerProvider

/// Facebook's two callbacks about a person, each a form with a `signed_request` verified with the
/// app's secret (``FacebookSignedRequest``), stored once (the same request again is the same
/// message), ending the person's held grants and live requests for the app, and told to the
/// backend:
///
/// - `POST /v1/facebook/deauthorize/{app_id}`, the app's *Deauthorize callback URL*: the person
///   removed the app (`facebook.deauthorized`). Facebook documents no answer: 200 once stored.
/// - `POST /v1/facebook/data-deletion/{app_id}`, the app's *Data Deletion Request URL*: the person
///   removed the app and asks that their data be deleted (`facebook.data_deletion_requested`). It
///   opens an erasure request, and the answer is what Meta requires, `{"url", "confirmation_code"}`:
///   the status page the person reads, and its code (alphanumeric, the same for every receipt).
public struct FacebookCallbackInbox: ProviderInbox {
    /// Which callback.
    public enum Callback: Sendable, CaseIterable {
        case deauthorize
        case dataDeletion
    }

    /// The apps whose callbacks are received, by app id.
    let apps: [String: FacebookApp]
    public let callback: Callback

    public init(_ callback: Callback, apps: [String: FacebookApp]) {
        self.callback = callback
        self.apps = apps
    }

    /// How the store and the audit trail name what the person did.
    public var type: String {
        switch callback {
        case .deauthorize: "deauthorize"
        case .dataDeletion: "data-deletion"
        }
    }

    public var eventType: String {
        switch callback {
        case .deauthorize: "facebook.deauthorized"
        case .dataDeletion: "facebook.data_deletion_requested"
        }
    }

    public var routes: [String] {
        switch callback {
        case .deauthorize: ["facebook/deauthorize/{client_id}"]
        case .dataDeletion: ["facebook/data-deletion/{client_id}"]
        }
    }

    /// A form with one `signed_request` of at most 8 KiB.
    public var maximumBodyBytes: Int { 16 * 1024 }

    public var metricLabel: String {
        switch callback {
        case .deauthorize: "revoker_facebook_deauthorizations_total"
        case .dataDeletion: "revoker_facebook_data_deletions_total"
        }
    }

    public var source: ProviderMessageSource {
        ProviderMessageSource(provider: .facebook, actor: "facebook:\(type)", sender: "Facebook")
    }

    public var closedReason: String? {
        apps.isEmpty ? "Facebook's callbacks are not received here: no Facebook app is configured." : nil
    }

    public func receive(_ body: [UInt8], clientID: String?) async throws -> ProviderMessage {
        // An app id not configured here is answered as a request signed with another secret, so
        // that the URL does not tell which apps are configured.
        let (request, app) = try Self.signedRequest(in: body, app: clientID.flatMap { apps[$0] })
        return ProviderMessage(
            // Per callback: Facebook may sign the same payload for both in the same second.
            id: callback == .deauthorize ? request.digest : "\(type):\(request.digest)",
            clientID: app.appID,
            type: type,
            userID: request.userID,
            endsGrants: true,
            eventType: eventType,
            eventTime: request.issuedAt,
            issuedAt: request.issuedAt,
            issuer: "facebook",
            keyID: "app_secret",
            opensErasure: callback == .dataDeletion
        )
    }

    public func accepted(_ receipt: InboxReceipt) -> InboxAnswer {
        guard callback == .dataDeletion, let erasure = receipt.erasure else { return InboxAnswer(status: 200) }
        let body = try? JSONSerialization.data(
            withJSONObject: ["url": erasure.statusURL, "confirmation_code": erasure.code],
            options: [.sortedKeys, .withoutEscapingSlashes]
        )
        return InboxAnswer(status: 200, contentType: "application/json", body: Array(body ?? Data()))
    }

    /// The API's own problem, naming `signed_request`.
    public func refused(_ refusal: InboxRefusal) -> InboxAnswer? { nil }

    /// The form's one `signed_request`, verified with the app's secret (nil: an app not
    /// configured here, refused as a signature that does not verify).
    static func signedRequest(in body: [UInt8], app: FacebookApp?) throws -> (FacebookSignedRequest, FacebookApp) {
        guard let text = String(validating: body, as: UTF8.self), let form = FormEncoding.decode(text) else {
            throw InboxRefusal.malformedBody("The body is not an application/x-www-form-urlencoded form.")
        }
        guard let signed = form["signed_request"], !signed.isEmpty else {
            throw InboxRefusal.malformedBody("The form has no signed_request.", field: "signed_request")
        }
        do throws(FacebookLoginError) {
            guard let app else {
                throw FacebookLoginError(.invalidSignature, "The signed_request's signature does not verify with the app's secret.")
            }
            return (try FacebookSignedRequest.verify(signed, secret: app.secret), app)
        } catch {
            throw InboxRefusal(code: error.code.rawValue, message: error.message, field: "signed_request")
        }
    }
}
