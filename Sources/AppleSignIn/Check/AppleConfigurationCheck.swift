import Foundation
import RevokerProvider

/// What `revoker check` finds of the Apple apps: each app's key loaded and a client secret
/// signed (its header and claims decoded, never the signature), and with `online` Apple's
/// verdict on it.
public enum AppleConfigurationCheck {
    /// Checks `apps`; with `client`, sends each app's secret to Apple's revoke endpoint with a
    /// random token (200 proves the client credentials; no grant is touched).
    public static func run(
        apps: [String: AppleAppSettings],
        baseURL: String,
        clientSecretLifetime: Duration,
        online client: AppleClient?
    ) async -> ProviderCheckReport {
        var problems: [String] = []
        var entries: [JSONValue] = []
        for clientID in apps.keys.sorted() {
            guard let app = apps[clientID] else { continue }
            var entry: [String: JSONValue] = [
                "client_id": .string(clientID), "team_id": .string(app.apple.teamID), "key_id": .string(app.apple.keyID),
                "redirect_uri": .string(app.defaultRedirectURI),
            ]
            do {
                let signer = try await ClientSecretSigner(app: app.apple, lifetime: clientSecretLifetime)
                let (header, claims) = try decode(try await signer.sign())
                entry["client_secret"] = .object(["header": header, "claims": claims])
                entry["key"] = "loaded"
                if let client {
                    let (ok, detail) = await probe(AppleAppClient(client: client, signer: signer))
                    entry["online"] = .object(["result": .string(ok ? "accepted" : "failed"), "detail": .string(detail)])
                    if !ok { problems.append("app \(clientID): \(detail)") }
                }
            } catch {
                let message = (error as? AppleSignInError)?.message ?? "the signed client secret could not be decoded"
                entry["key"] = "unusable"
                entry["problem"] = .string(message)
                problems.append("app \(clientID): \(message)")
                if client != nil {
                    entry["online"] = .object(["result": "skipped", "detail": "no client secret could be signed"])
                }
            }
            entries.append(.object(entry))
        }
        return ProviderCheckReport(
            sections: ["apple_base_url": .string(baseURL), "apps": .array(entries)],
            problems: problems,
            appCount: entries.count
        )
    }

    /// The JWS header and claims of a signed secret, decoded; the signature is dropped unread.
    static func decode(_ jws: String) throws -> (JSONValue, JSONValue) {
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let header = base64URLDecode(parts[0]), let claims = base64URLDecode(parts[1]) else {
            throw AppleSignInError(.signingFailed, "the signed client secret could not be decoded")
        }
        return (try StrictJSON.parse(Array(header)), try StrictJSON.parse(Array(claims)))
    }

    static func base64URLDecode(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }

    /// Revokes a random token that matches no grant: 200 proves the client credentials.
    static func probe(_ client: AppleAppClient) async -> (ok: Bool, detail: String) {
        var generator = SystemRandomNumberGenerator()
        let token = "revoker-check-" + (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined()
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
}
