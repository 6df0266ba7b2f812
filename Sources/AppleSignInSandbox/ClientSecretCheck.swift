import AppleSignIn
import Crypto
import Foundation
import ProviderSandbox

/// Checks a client secret the way Apple does; the reason for a refusal is kept for the
/// sandbox's statistics (Apple itself only says `invalid_client`).
enum ClientSecretCheck {
    private struct Header: Decodable {
        var alg: String?
        var kid: String?
    }

    private struct Claims: Decodable {
        var iss: String?
        var sub: String?
        var aud: Audience?
        var iat: Double?
        var exp: Double?
    }

    private enum Audience: Decodable {
        case one(String)
        case many([String])
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let value = try? container.decode(String.self) { self = .one(value) } else { self = .many(try container.decode([String].self)) }
        }
        var values: [String] {
            switch self {
            case .one(let value): [value]
            case .many(let values): values
            }
        }
    }

    /// What a verified secret proved: its signature and fixed claims hold for this app; its
    /// times are checked at every use.
    struct Verified: Sendable {
        var clientID: String
        var keyID: String
        var teamID: String
        var publicKey: Data
        var issuedAt: Double
        var expires: Double

        func belongs(to app: SandboxState.App) -> Bool {
            clientID == app.clientID && keyID == app.keyID && teamID == app.teamID && publicKey == app.publicKey.rawRepresentation
        }
    }

    /// `verified` if its times accept it now.
    static func current(_ verified: Verified, now: Date, skew: TimeInterval) -> Result<Verified, Problem> {
        guard verified.issuedAt <= now.timeIntervalSince1970 + skew else { return .failure(Problem(reason: "iat is in the future")) }
        guard verified.expires > now.timeIntervalSince1970 else { return .failure(Problem(reason: "the secret has expired")) }
        return .success(verified)
    }

    struct Problem: Error {
        var reason: String
    }

    /// Checks everything about `secret` but the times against now.
    static func verify(_ secret: String, for app: SandboxState.App) -> Result<Verified, Problem> {
        func refuse(_ reason: String) -> Result<Verified, Problem> { .failure(Problem(reason: reason)) }
        let parts = secret.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let headerData = Data(base64URL: parts[0]), let claimsData = Data(base64URL: parts[1]), let signature = Data(base64URL: parts[2])
        else { return refuse("client_secret is not a compact JWS") }
        let decoder = JSONDecoder()
        guard let header = try? decoder.decode(Header.self, from: headerData) else { return refuse("the JWS header is not JSON") }
        guard header.alg == "ES256" else { return refuse("alg is \(header.alg ?? "missing"), not ES256") }
        guard header.kid == app.keyID else { return refuse("kid does not match the registered key") }
        guard let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
            app.publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return refuse("the signature does not verify with the registered key") }
        guard let claims = try? decoder.decode(Claims.self, from: claimsData) else { return refuse("the JWS claims are not JSON") }
        guard claims.iss == app.teamID else { return refuse("iss is not the registered Team ID") }
        guard claims.sub == app.clientID else { return refuse("sub is not the client_id") }
        guard claims.aud?.values == [ClientSecretClaims.audience] else { return refuse("aud is not \(ClientSecretClaims.audience)") }
        guard let iat = claims.iat, let exp = claims.exp else { return refuse("iat or exp is missing") }
        guard exp - iat <= Double(ClientSecretSigner.maximumLifetime.components.seconds) else {
            return refuse("exp is more than 15777000 s after iat")
        }
        return .success(
            Verified(
                clientID: app.clientID,
                keyID: app.keyID,
                teamID: app.teamID,
                publicKey: app.publicKey.rawRepresentation,
                issuedAt: iat,
                expires: exp
            )
        )
    }
}
