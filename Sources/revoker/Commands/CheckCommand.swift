import AppleSignIn
import ArgumentParser
import Foundation
import Logging
import RevokerApp
import RevokerConfiguration
import RevokerStore
import RevokerWorker

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Check the configuration: load every app's key, sign a client secret per app and, with --online, try it at Apple.",
        discussion: """
            Loads every setting (configuration file and environment), loads each app's .p8 key, signs a client \
            secret for each app and prints the secret's decoded header and claims as JSON on standard output, \
            never the signature or the key. Problems are also summarised on standard error, one line each.

            With --online, each app's secret is sent to Apple's revoke endpoint (REVOKER_APPLE_BASE_URL) with a \
            random token that matches no user: Apple answers 200 when the client credentials are right and \
            invalid_client when the Team ID, Key ID, key or client_id do not match what Apple has. No grant is touched.

            When a database is configured (DATABASE_URL or "database_url"), also reports whether it is reachable \
            and whether its migrations are current.

            Example:
              revoker check --config /etc/revoker/revoker.json --online

            Exit codes: 0 all good, 1 an app or the database failed its check, 2 the configuration cannot be loaded.
            """
    )

    @OptionGroup var options: ConfigurationOptions

    @Flag(name: .customLong("online"), help: "Also try each app's client secret at Apple's revoke endpoint with a random token.")
    var online = false

    func run() async throws {
        let configuration = try loadConfiguration(options, needs: [.apps, .keyring])
        if !configuration.databaseURL.isEmpty {
            do {
                _ = try configuration.databaseConfiguration()
            } catch let error as ConfigurationError {
                throw fail(error.message)
            }
        }
        let logger = CommandLogging.logger(label: "revoker.check", level: options.logLevel)
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
            "sealing_keys": ["current_key_id": configuration.keyring.currentKeyID, "key_ids": configuration.keyring.keyIDs],
            "database": database,
        ]
        let data = try JSONSerialization.data(withJSONObject: report, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        FileHandle.standardOutput.write(data + Data("\n".utf8))

        let standardError = FileHandle.standardError
        for problem in problems {
            standardError.write(Data("revoker: check failed: \(problem)\n".utf8))
        }
        guard problems.isEmpty else { throw Exit.someFailed }
        let onlineNote = online ? ", accepted by Apple" : " (add --online to try them at Apple)"
        let databaseNote = configuration.databaseURL.isEmpty ? "" : "; the database is reachable and its migrations are current"
        standardError.write(Data("revoker: check passed: \(apps.count) app\(apps.count == 1 ? "" : "s") signed\(onlineNote)\(databaseNote).\n".utf8))
    }

    /// The JWS header and claims of a signed secret, decoded; the signature is dropped unread.
    static func decode(_ jws: String) throws -> (Any, Any) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URLDecode(parts[0]), let claims = base64URLDecode(parts[1]) else {
            throw DecodeFailure()
        }
        return (try JSONSerialization.jsonObject(with: header), try JSONSerialization.jsonObject(with: claims))
    }

    struct DecodeFailure: Error {}

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// Revokes a random token that matches no grant: 200 proves the client credentials.
    static func probe(_ client: AppleAppClient) async -> (ok: Bool, detail: String) {
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

    /// Whether the database answers, and whether its migrations are current.
    static func checkDatabase(_ configuration: RevokerConfiguration, logger: Logger) async -> (reachable: Bool, current: Bool?, problem: String?) {
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
