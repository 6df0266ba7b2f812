import AppleSignIn
import Crypto
import Foundation
import Hummingbird
import JWTKit
import Logging
import NIOCore
import NIOFoundationCompat
import ProviderSandbox
import ServiceLifecycle

/// The admin surface under `/sandbox/`: register apps, sign users in, mint identity tokens.
extension AppleSandbox {
    func registerApp(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let body = try await request.decode(as: SandboxAdmin.RegisterApp.self, context: context)
        try await register(body)
        return Self.json(["client_id": body.clientID], status: .created)
    }

    func mint(_ request: Request, context: SandboxRequestContext, kind: SandboxState.TokenKind?) async throws -> Response {
        let body = try await request.decode(as: SandboxAdmin.Mint.self, context: context)
        let now = clock.now
        let minted: (String, String)
        if let kind {
            minted = await state.mintToken(kind, clientID: body.clientID, subject: body.subject)
        } else {
            let lifetime = body.lifetimeSeconds ?? TimeInterval(configuration.codeLifetime.components.seconds)
            minted = await state.mintCode(
                clientID: body.clientID,
                subject: body.subject,
                redirectURI: body.redirectURI,
                lifetime: lifetime,
                now: now
            )
        }
        try await signIdentityToken(grantID: minted.1, clientID: body.clientID, subject: body.subject, now: now)
        return Self.json(SandboxAdmin.Minted(value: minted.0, grantID: minted.1), status: .created)
    }

    func mintIdentityToken(_ request: Request, context: SandboxRequestContext) async throws -> Response {
        let body = try await request.decode(as: SandboxAdmin.IdentityTokenRequest.self, context: context)
        let now = clock.now
        let claims = AppleIdentityClaims(
            issuer: body.issuer ?? AppleIdentityClaims.appleIssuer,
            subject: body.subject,
            audience: body.audience,
            issuedAt: now,
            expires: now.addingTimeInterval(body.expiresIn ?? TimeInterval(configuration.identityTokenLifetime.components.seconds))
        )
        guard let bend = body.bend else { return Self.json(SandboxAdmin.Value(value: try await identityTokens.sign(claims)), status: .created) }
        // Signed by hand to bend: the typed claims go through JSON first.
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .secondsSince1970
        let object = try JSONSerialization.jsonObject(with: try encoder.encode(claims)) as? [String: Any] ?? [:]
        return Self.json(SandboxAdmin.Value(value: try await identityTokens.sign(claims: object, .bent(bend))), status: .created)
    }
}
