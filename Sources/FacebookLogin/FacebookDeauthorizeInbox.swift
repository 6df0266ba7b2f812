import Foundation
import RevokerProvider

/// `POST /v1/facebook/deauthorize/{app_id}`: the app's Deauthorize Callback URL. Facebook posts a
/// form with a `signed_request` when a person removes the app; it is verified with that app's
/// secret (``FacebookSignedRequest``), stored once (the same request again is the same message),
/// ends the person's held grants and live requests for the app, and tells the backend
/// (`facebook.deauthorized`). Facebook documents no answer: 200 once stored.
public struct FacebookDeauthorizeInbox: ProviderInbox {
    public static let source = ProviderMessageSource(provider: .facebook, actor: "facebook:deauthorize", sender: "Facebook")
    /// How the store and the audit trail name what the person did.
    public static let type = "deauthorize"
    public static let eventType = "facebook.deauthorized"

    /// The apps whose callbacks are received, by app id.
    let apps: [String: FacebookApp]

    public init(apps: [String: FacebookApp]) {
        self.apps = apps
    }

    public var routes: [String] { ["facebook/deauthorize/{client_id}"] }
    /// A form with one `signed_request` of at most 8 KiB.
    public var maximumBodyBytes: Int { 16 * 1024 }
    public var metricLabel: String { "revoker_facebook_deauthorizations_total" }
    public var source: ProviderMessageSource { Self.source }
    public var closedReason: String? {
        apps.isEmpty ? "Facebook's Deauthorize callbacks are not received here: no Facebook app is configured." : nil
    }

    public func receive(_ body: [UInt8], clientID: String?) async throws -> ProviderMessage {
        // An app id not configured here is answered as a request signed with another secret, so
        // that the URL does not tell which apps are configured.
        let (request, app) = try Self.signedRequest(in: body, app: clientID.flatMap { apps[$0] })
        return ProviderMessage(
            id: request.digest,
            clientID: app.appID,
            type: Self.type,
            userID: request.userID,
            endsGrants: true,
            eventType: Self.eventType,
            eventTime: request.issuedAt,
            issuedAt: request.issuedAt,
            issuer: "facebook",
            keyID: "app_secret"
        )
    }

    public func accepted(duplicate _: Bool) -> InboxAnswer { InboxAnswer(status: 200) }

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
