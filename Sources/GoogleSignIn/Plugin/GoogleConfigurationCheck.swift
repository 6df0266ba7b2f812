import Foundation
import RevokerProvider

/// What `revoker check` finds of the Google apps: each app's client secret loaded, and with
/// `online` Google's verdicts on the app's credentials.
public enum GoogleConfigurationCheck {
    /// Checks `apps`; with `online`, probes each through `provider` (no grant is touched).
    public static func run(
        apps: [String: GoogleApp],
        client: GoogleClient.Configuration,
        online provider: GoogleProvider?
    ) async -> ProviderCheckReport {
        var problems: [String] = []
        var entries: [JSONValue] = []
        for clientID in apps.keys.sorted() {
            guard let app = apps[clientID] else { continue }
            var entry: [String: JSONValue] = [
                "client_id": .string(clientID), "audiences": .strings(app.audiences), "redirect_uri": .string(app.defaultRedirectURI),
                "client_secret": "loaded",
            ]
            if let providerApp = provider?.app(clientID: clientID) {
                let (ok, detail) = await probe(providerApp)
                entry["online"] = .object(["result": .string(ok ? "accepted" : "failed"), "detail": .string(detail)])
                if !ok { problems.append("Google app \(clientID): \(detail)") }
            }
            entries.append(.object(entry))
        }
        return ProviderCheckReport(
            sections: [
                "google": .object([
                    "oauth_base_url": .string(client.oauthBaseURL), "certs_url": .string(client.certsURL), "apps": .array(entries),
                ])
            ],
            problems: problems,
            appCount: entries.count
        )
    }

    /// A Google app's verdicts: a revoke of a random token (Google answers `invalid_token`: the
    /// endpoint is reached and no grant is touched), then a refresh with one (`invalid_grant`
    /// proves the client_id and secret; `invalid_client` says they are wrong).
    static func probe(_ app: any ProviderApp) async -> (ok: Bool, detail: String) {
        do {
            try await app.revoke(token: "revoker-check-\(UUID().uuidString)", kind: .accessToken)
            return (false, "Google revoked a token that was made up")
        } catch let failure as ProviderFailure where failure.classification == .credentialRejected {
        } catch let failure as ProviderFailure {
            return (false, "no verdict from Google's revoke endpoint: \(failure.description)")
        } catch {
            return (false, "no verdict from Google's revoke endpoint: the call failed")
        }
        do {
            try await app.probe()
            return (true, "Google's revoke endpoint answered; /token accepted the client_id and secret (invalid_grant for a made-up token)")
        } catch let failure as ProviderFailure where failure.classification == .configurationFault {
            return (false, "Google answered \(failure.error ?? "an error"): the client_id or the client secret is wrong (\(failure.detail))")
        } catch let failure as ProviderFailure {
            return (false, "no verdict from Google's token endpoint: \(failure.description)")
        } catch {
            return (false, "no verdict from Google's token endpoint: the call failed")
        }
    }
}
