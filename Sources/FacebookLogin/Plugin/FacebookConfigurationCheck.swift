import Foundation
import RevokerProvider

/// What `revoker check` finds of the Facebook apps: each app's secret loaded, and with `online`
/// Facebook's verdict on the app's id and secret.
public enum FacebookConfigurationCheck {
    /// Checks `apps`; with `online`, probes each through `provider` (no grant is touched).
    public static func run(
        apps: [String: FacebookApp],
        client: FacebookClient.Configuration,
        online provider: FacebookProvider?
    ) async -> ProviderCheckReport {
        var problems: [String] = []
        var entries: [JSONValue] = []
        for appID in apps.keys.sorted() {
            var entry: [String: JSONValue] = ["app_id": .string(appID), "app_secret": "loaded"]
            if let providerApp = provider?.app(clientID: appID) {
                let (ok, detail) = await probe(providerApp)
                entry["online"] = .object(["result": .string(ok ? "accepted" : "failed"), "detail": .string(detail)])
                if !ok { problems.append("Facebook app \(appID): \(detail)") }
            }
            entries.append(.object(entry))
        }
        return ProviderCheckReport(
            sections: [
                "facebook": .object([
                    "graph_base_url": .string(client.graphBaseURL), "graph_version": .string(client.graphVersion),
                    "limited_login_keys_url": .string(client.limitedLoginKeysURL), "apps": .array(entries),
                ])
            ],
            problems: problems,
            appCount: entries.count
        )
    }

    /// `debug_token` of the app's own token: accepted once Facebook takes the app id and secret.
    static func probe(_ app: any ProviderApp) async -> (ok: Bool, detail: String) {
        do {
            try await app.probe()
            return (true, "the Graph API took the app's own token (debug_token)")
        } catch let failure as ProviderFailure where failure.classification == .configurationFault {
            return (false, "Facebook refused the app's own token: the app id or the app secret is wrong (\(failure.detail))")
        } catch let failure as ProviderFailure {
            return (false, "no verdict from the Graph API: \(failure.description)")
        } catch {
            return (false, "no verdict from the Graph API: the call failed")
        }
    }
}
