import AppleSignIn
import Foundation
import GoogleSignIn
import Logging
import RevokerConfiguration
import RevokerStore
import RevokerWorker

/// What `revoker check` finds: every app's key loaded and a client secret signed (its header
/// and claims decoded, never the signature), optionally Apple's verdict on it, and the database.
public enum ConfigurationCheck {
    /// The findings, as JSON for people and scripts, and one line per problem.
    public struct Report: Sendable {
        /// The findings as pretty-printed JSON.
        public let json: Data
        /// What failed, one line each; empty when all is well.
        public let problems: [String]
        /// How many apps were checked.
        public let appCount: Int
    }

    /// Checks every configured app; with `online`, sends each app's secret to Apple's revoke
    /// endpoint with a random token (200 proves the client credentials; no grant is touched).
    public static func run(_ configuration: RevokerConfiguration, online: Bool, logger: Logger) async throws -> Report {
        var problems: [String] = []
        var apps: [[String: Any]] = []
        var signers: [(String, ClientSecretSigner)] = []

        for clientID in configuration.apps.keys.sorted() {
            guard let app = configuration.apps[clientID] else { continue }
            var entry: [String: Any] = ["client_id": clientID, "team_id": app.apple.teamID, "key_id": app.apple.keyID]
            entry["redirect_uri"] = app.defaultRedirectURI ?? NSNull()
            do {
                let signer = try await ClientSecretSigner(app: app.apple, lifetime: configuration.worker.clientSecretLifetime)
                let secret = try await signer.sign()
                let (header, claims) = try Self.decode(secret)
                entry["client_secret"] = ["header": header, "claims": claims]
                entry["key"] = "loaded"
                signers.append((clientID, signer))
            } catch let error as AppleSignInError {
                entry["key"] = "unusable"
                entry["problem"] = error.message
                problems.append("app \(clientID): \(error.message)")
            } catch {
                entry["key"] = "unusable"
                entry["problem"] = "the signed client secret could not be decoded"
                problems.append("app \(clientID): the signed client secret could not be decoded")
            }
            apps.append(entry)
        }

        if online {
            let results = try await RevokerApp.withAppleClient(configuration, logger: logger) { client in
                var results: [String: (ok: Bool, detail: String)] = [:]
                for (clientID, signer) in signers {
                    results[clientID] = await Self.probe(AppleAppClient(client: client, signer: signer))
                }
                return results
            }
            for index in apps.indices {
                guard let clientID = apps[index]["client_id"] as? String else { continue }
                guard let result = results[clientID] else {
                    apps[index]["online"] = ["result": "skipped", "detail": "no client secret could be signed"]
                    continue
                }
                apps[index]["online"] = ["result": result.ok ? "accepted" : "failed", "detail": result.detail]
                if !result.ok { problems.append("app \(clientID): \(result.detail)") }
            }
        }

        var googleApps: [[String: Any]] = configuration.googleApps.keys.sorted().compactMap { clientID in
            guard let app = configuration.googleApps[clientID] else { return nil }
            return [
                "client_id": clientID, "audiences": app.audiences, "redirect_uri": app.defaultRedirectURI ?? NSNull(),
                "client_secret": "loaded",
            ]
        }
        if online, !googleApps.isEmpty {
            let results = try await RevokerApp.withProviders(configuration, logger: logger) { providers in
                var results: [String: [String: String]] = [:]
                for clientID in configuration.googleApps.keys {
                    guard let app = providers.app(provider: .google, clientID: clientID) else { continue }
                    results[clientID] = await Self.probe(google: app)
                }
                return results
            }
            for index in googleApps.indices {
                guard let clientID = googleApps[index]["client_id"] as? String, let result = results[clientID] else { continue }
                googleApps[index]["online"] = result
                if result["result"] != "accepted" { problems.append("Google app \(clientID): \(result["detail"] ?? "")") }
            }
        }

        var database: [String: Any] = ["configured": !configuration.databaseURL.isEmpty]
        if !configuration.databaseURL.isEmpty {
            let (reachable, current, detail) = await Self.checkDatabase(configuration, logger: logger)
            database["reachable"] = reachable
            database["migrations_current"] = current ?? NSNull()
            if let detail {
                database["problem"] = detail
                problems.append("database: \(detail)")
            }
        }

        let report: [String: Any] = [
            "ok": problems.isEmpty,
            "apple_base_url": configuration.appleBaseURL,
            "apps": apps,
            "google": ["oauth_base_url": configuration.google.oauthBaseURL, "certs_url": configuration.google.certsURL, "apps": googleApps],
            "sealing_keys": ["current_key_id": configuration.keyring.currentKeyID, "key_ids": configuration.keyring.keyIDs],
            "database": database,
        ]
        let json = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return Report(json: json, problems: problems, appCount: apps.count + googleApps.count)
    }

    /// The JWS header and claims of a signed secret, decoded; the signature is dropped unread.
    private static func decode(_ jws: String) throws -> (Any, Any) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URLDecode(parts[0]), let claims = base64URLDecode(parts[1]) else {
            throw DecodeFailure()
        }
        return (try JSONSerialization.jsonObject(with: header), try JSONSerialization.jsonObject(with: claims))
    }

    struct DecodeFailure: Error {}

    private static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// Revokes a random token that matches no grant: 200 proves the client credentials.
    private static func probe(_ client: AppleAppClient) async -> (ok: Bool, detail: String) {
        var generator = SystemRandomNumberGenerator()
        let token = "revoker-check-" + (0..<32).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
        do {
            try await client.revoke(token: token, hint: .refreshToken)
            return (true, "Apple accepted the client secret (HTTP 200)")
        } catch let error as AppleAPIError where error.error == "invalid_client" {
            return (false, "Apple answered invalid_client: the Team ID, Key ID, .p8 key or client_id do not match what Apple has for this app")
        } catch let error as AppleAPIError where error.classification == .configurationFault {
            return (false, "Apple answered \(error.error ?? "an error"): the app's Sign in with Apple settings are wrong (\(error.detail))")
        } catch let error as AppleAPIError {
            return (false, "no verdict from Apple: \(error.description)")
        } catch {
            return (false, "no verdict from Apple: the call failed")
        }
    }

    /// A Google app's verdicts: a revoke of a random token (Google answers `invalid_token`: the
    /// endpoint is reached and no grant is touched), then a refresh with one (`invalid_grant`
    /// proves the client_id and secret; `invalid_client` says they are wrong).
    private static func probe(google app: any ProviderApp) async -> [String: String] {
        do {
            try await app.revoke(token: "revoker-check-\(UUID().uuidString)", kind: .accessToken)
            return ["result": "failed", "detail": "Google revoked a token that was made up"]
        } catch let failure as ProviderFailure where failure.classification == .credentialRejected {
        } catch let failure as ProviderFailure {
            return ["result": "failed", "detail": "no verdict from Google's revoke endpoint: \(failure.description)"]
        } catch {
            return ["result": "failed", "detail": "no verdict from Google's revoke endpoint: the call failed"]
        }
        do {
            try await app.probe()
            return [
                "result": "accepted",
                "detail": "Google's revoke endpoint answered; /token accepted the client_id and secret (invalid_grant for a made-up token)",
            ]
        } catch let failure as ProviderFailure where failure.classification == .configurationFault {
            return [
                "result": "failed",
                "detail": "Google answered \(failure.error ?? "an error"): the client_id or the client secret is wrong (\(failure.detail))",
            ]
        } catch let failure as ProviderFailure {
            return ["result": "failed", "detail": "no verdict from Google's token endpoint: \(failure.description)"]
        } catch {
            return ["result": "failed", "detail": "no verdict from Google's token endpoint: the call failed"]
        }
    }

    /// Whether the database answers, and whether its migrations are current.
    private static func checkDatabase(
        _ configuration: RevokerConfiguration,
        logger: Logger
    ) async -> (reachable: Bool, current: Bool?, problem: String?) {
        var quiet = logger
        quiet.logLevel = .critical
        do {
            let app = try await RevokerApp(configuration: configuration, logger: quiet)
            return try await app.withRunning(waitForStartup: false) { running in
                do {
                    try await running.app.startup.reach()
                } catch let error as RevokerAppError {
                    return (false, nil, error.message)
                }
                do {
                    let current = try await running.app.startup.schemaIsCurrent()
                    return (true, current, current ? nil : "the schema is not current: run `revoker migrate`")
                } catch let error as RevokerAppError {
                    return (true, nil, error.message)
                }
            }
        } catch {
            return (false, nil, "\(error)")
        }
    }
}
