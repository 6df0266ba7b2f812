import AppleSignIn
import Crypto
import Foundation
import ProviderSandbox

/// Everything the sandbox knows: registered apps, grants and their codes and tokens.
/// One actor keeps each call's check-and-update atomic, as Apple's store would be.
actor SandboxState: SandboxRecords {
    struct App {
        var clientID: String
        var teamID: String
        var keyID: String
        var publicKey: P256.Signing.PublicKey
    }

    struct Grant {
        var report: SandboxGrantReport
        var code: String?
        var codeExpiresAt: Date?
        var codeRedirectURI: String?
        var codeUsed = false
        /// Signed ahead of use so RSA signing stays off the `/auth/token` path.
        var identityToken: (token: String, expiresAt: Date)?
    }

    enum TokenKind { case refresh, access }

    private(set) var apps: [String: App] = [:]
    private var grants: [String: Grant] = [:]
    private var grantOrder: [String] = []
    private var codes: [String: String] = [:]
    private var tokens: [String: (grantID: String, kind: TokenKind)] = [:]
    private(set) var faults: SandboxFaults
    /// Faults of `/auth/keys` alone, so a test can fail Apple's keys without failing its calls.
    private(set) var keyFaults = SandboxFaults.none
    private var statistics = SandboxStatistics()
    /// Client secrets whose signature verified, by digest, with the app they verified for.
    private var acceptedSecrets: [SHA256.Digest: ClientSecretCheck.Verified] = [:]

    init(faults: SandboxFaults) {
        self.faults = faults
    }

    // MARK: Admin

    func register(_ app: App) {
        apps[app.clientID] = app
        acceptedSecrets = acceptedSecrets.filter { $0.value.clientID != app.clientID }
    }

    func app(_ clientID: String) -> App? { apps[clientID] }

    func setFaults(_ faults: SandboxFaults) { self.faults = faults }

    func setKeyFaults(_ faults: SandboxFaults) { self.keyFaults = faults }

    func newGrant(clientID: String, subject: String) -> String {
        let id = UUID().uuidString.lowercased()
        grants[id] = Grant(report: SandboxGrantReport(id: id, clientID: clientID, subject: subject))
        grantOrder.append(id)
        return id
    }

    func mintCode(clientID: String, subject: String, redirectURI: String?, lifetime: TimeInterval, now: Date) -> (code: String, grantID: String) {
        let grantID = newGrant(clientID: clientID, subject: subject)
        let code = "c" + SandboxRandom.hex() + ".0.sandbox"
        grants[grantID]?.code = code
        grants[grantID]?.codeExpiresAt = now.addingTimeInterval(lifetime)
        grants[grantID]?.codeRedirectURI = redirectURI
        codes[code] = grantID
        return (code, grantID)
    }

    func mintToken(_ kind: TokenKind, clientID: String, subject: String) -> (token: String, grantID: String) {
        let grantID = newGrant(clientID: clientID, subject: subject)
        return (addToken(kind, to: grantID), grantID)
    }

    func report(_ grantID: String) -> SandboxGrantReport? { grants[grantID]?.report }

    func storeIdentityToken(_ token: String, expiresAt: Date, for grantID: String) {
        grants[grantID]?.identityToken = (token, expiresAt)
    }

    /// The grant's signed identity token while it has at least `margin` left to live.
    func identityToken(for grantID: String, validAfter date: Date) -> String? {
        guard let cached = grants[grantID]?.identityToken, cached.expiresAt > date else { return nil }
        return cached.token
    }

    func reports() -> [SandboxGrantReport] { grantOrder.compactMap { grants[$0]?.report } }

    func currentStatistics() -> SandboxStatistics { statistics }

    // MARK: Apple's endpoints

    /// Notes a client secret whose signature and fixed claims verified, for
    /// ``SandboxStatistics/clientSecrets`` and so that its next use checks only the times.
    func accepted(_ digest: SHA256.Digest, _ verified: ClientSecretCheck.Verified) {
        if acceptedSecrets.updateValue(verified, forKey: digest) == nil { statistics.clientSecrets += 1 }
    }

    /// Records a call and its answer, on the grant it concerns when one is known.
    func record(endpoint: String, status: Int, error: String?, grantID: String?, now: Date, rejection: String? = nil) {
        statistics.count(endpoint: endpoint, status: status, error: error, rejection: rejection)
        if let grantID {
            grants[grantID]?.report.calls.append(SandboxCall(endpoint: endpoint, status: status, at: now.timeIntervalSince1970, error: error))
        }
    }

    /// What a call needs before its real work, in one hop: the faults, the grant the code or
    /// token belongs to, and the app.
    func lookup(
        clientID: String?,
        credential: String?,
        secret: SHA256.Digest?
    ) -> (faults: SandboxFaults, grantID: String?, app: App?, verified: ClientSecretCheck.Verified?) {
        let grantID = credential.flatMap { codes[$0] ?? tokens[$0]?.grantID }
        return (faults, grantID, clientID.flatMap { apps[$0] }, secret.flatMap { acceptedSecrets[$0] })
    }

    struct IssuedTokens {
        var accessToken: String
        var refreshToken: String?
        var subject: String
        var grantID: String
        /// The grant's identity token when one is kept that is still good.
        var identityToken: String?
    }

    enum Answer {
        case tokens(IssuedTokens)
        case rejected(error: String, description: String)
    }

    /// Exchanges a code and records the call.
    func exchange(code: String, clientID: String, redirectURI: String?, now: Date, identityTokenValidAfter: Date) -> Answer {
        let answer = exchange(code: code, clientID: clientID, redirectURI: redirectURI, now: now)
        return recorded(answer, grantID: codes[code], now: now, identityTokenValidAfter: identityTokenValidAfter)
    }

    /// Validates a refresh token and records the call.
    func validate(refreshToken: String, clientID: String, now: Date, identityTokenValidAfter: Date) -> Answer {
        let answer = validate(refreshToken: refreshToken, clientID: clientID)
        return recorded(answer, grantID: tokens[refreshToken]?.grantID, now: now, identityTokenValidAfter: identityTokenValidAfter)
    }

    private func recorded(_ answer: Answer, grantID: String?, now: Date, identityTokenValidAfter: Date) -> Answer {
        switch answer {
        case .rejected(let error, _):
            record(endpoint: AppleEndpoint.token.rawValue, status: 400, error: error, grantID: grantID, now: now)
            return answer
        case .tokens(var issued):
            record(endpoint: AppleEndpoint.token.rawValue, status: 200, error: nil, grantID: grantID, now: now)
            issued.identityToken = identityToken(for: issued.grantID, validAfter: identityTokenValidAfter)
            return .tokens(issued)
        }
    }

    private func exchange(code: String, clientID: String, redirectURI: String?, now: Date) -> Answer {
        guard let grantID = codes[code], let grant = grants[grantID] else {
            return .rejected(error: "invalid_grant", description: "The code has expired or has been revoked.")
        }
        let refused: String? =
            if grant.report.clientID != clientID {
                "client_id mismatch. The code was not issued to \(clientID)."
            } else if grant.codeUsed {
                "The code has already been used."
            } else if let expiry = grant.codeExpiresAt, expiry <= now {
                "The code has expired."
            } else if grant.codeRedirectURI != redirectURI {
                "redirect_uri mismatch."
            } else if grant.report.revoked {
                "The grant has been revoked."
            } else {
                nil
            }
        if let refused {
            grants[grantID]?.report.rejectedCodeExchanges += 1
            return .rejected(error: "invalid_grant", description: refused)
        }
        grants[grantID]?.codeUsed = true
        grants[grantID]?.report.codeExchanges += 1
        let refresh = addToken(.refresh, to: grantID)
        let access = addToken(.access, to: grantID)
        return .tokens(IssuedTokens(accessToken: access, refreshToken: refresh, subject: grant.report.subject, grantID: grantID))
    }

    private func validate(refreshToken: String, clientID: String) -> Answer {
        guard let entry = tokens[refreshToken], entry.kind == .refresh, let grant = grants[entry.grantID] else {
            return .rejected(error: "invalid_grant", description: "The refresh token is invalid.")
        }
        guard grant.report.clientID == clientID, !grant.report.revoked else {
            grants[entry.grantID]?.report.rejectedValidations += 1
            return .rejected(
                error: "invalid_grant",
                description: grant.report.revoked ? "The refresh token has been revoked." : "client_id mismatch."
            )
        }
        grants[entry.grantID]?.report.validations += 1
        let access = addToken(.access, to: entry.grantID)
        return .tokens(IssuedTokens(accessToken: access, refreshToken: nil, subject: grant.report.subject, grantID: entry.grantID))
    }

    /// Revokes the grant behind a live token of this app and records the call.
    /// Unknown, dead and foreign tokens change nothing.
    func revoke(token: String, clientID: String, now: Date) {
        record(endpoint: AppleEndpoint.revoke.rawValue, status: 200, error: nil, grantID: tokens[token]?.grantID, now: now)
        guard let entry = tokens[token], let grant = grants[entry.grantID], grant.report.clientID == clientID else { return }
        grants[entry.grantID]?.report.revokeCalls += 1
        if !grant.report.revoked {
            grants[entry.grantID]?.report.revoked = true
            grants[entry.grantID]?.report.revocations += 1
        }
    }

    /// The user ended every grant of `subject` for the app at Apple (consent revoked, or the
    /// Apple account deleted): they are revoked, but not by a revoke call.
    func userEndedGrants(clientID: String, subject: String) {
        for id in grantOrder where grants[id]?.report.clientID == clientID && grants[id]?.report.subject == subject {
            grants[id]?.report.revoked = true
            grants[id]?.report.revokedByUser = true
        }
    }

    private func addToken(_ kind: TokenKind, to grantID: String) -> String {
        let token = (kind == .refresh ? "r" : "a") + SandboxRandom.hex() + ".0.sandbox"
        tokens[token] = (grantID, kind)
        return token
    }
}
