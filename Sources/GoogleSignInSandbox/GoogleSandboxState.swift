import Foundation
import ProviderSandbox

/// Everything the Google sandbox knows: OAuth clients, grants and their codes and tokens. One
/// actor keeps each call's check-and-update atomic.
actor GoogleSandboxState: SandboxRecords {
    struct Grant {
        var report: SandboxGrantReport
        var code: String?
        var codeExpiresAt: Date?
        var codeRedirectURI: String?
        var codeUsed = false
        /// Whether a refresh token is issued (the user granted offline access).
        var offline: Bool
        /// Whether identity tokens come with the grant's tokens (the `openid` scope).
        var openID: Bool
        var refreshToken: String?
        var identityToken: (token: String, expiresAt: Date)?
    }

    enum TokenKind: Sendable { case refresh, access }

    private(set) var clients: [String: String] = [:]
    private var grants: [String: Grant] = [:]
    private var grantOrder: [String] = []
    private var codes: [String: String] = [:]
    private var tokens: [String: (grantID: String, kind: TokenKind)] = [:]
    private(set) var faults: SandboxFaults
    /// Faults of the key set and the RISC discovery document alone.
    private(set) var keyFaults = SandboxFaults.none
    private var statistics = SandboxStatistics()

    init(faults: SandboxFaults) {
        self.faults = faults
    }

    func register(clientID: String, secret: String) { clients[clientID] = secret }
    func setFaults(_ faults: SandboxFaults) { self.faults = faults }
    func setKeyFaults(_ faults: SandboxFaults) { self.keyFaults = faults }

    func mintCode(
        clientID: String,
        subject: String,
        redirectURI: String?,
        lifetime: TimeInterval,
        offline: Bool,
        openID: Bool,
        now: Date
    ) -> SandboxAdmin.Minted {
        let grantID = newGrant(clientID: clientID, subject: subject, offline: offline, openID: openID)
        let code = "4/0" + SandboxRandom.hex()
        grants[grantID]?.code = code
        grants[grantID]?.codeExpiresAt = now.addingTimeInterval(lifetime)
        grants[grantID]?.codeRedirectURI = redirectURI
        codes[code] = grantID
        return SandboxAdmin.Minted(value: code, grantID: grantID)
    }

    func mintToken(_ kind: TokenKind, clientID: String, subject: String, openID: Bool) -> SandboxAdmin.Minted {
        let grantID = newGrant(clientID: clientID, subject: subject, offline: kind == .refresh, openID: openID)
        return SandboxAdmin.Minted(value: addToken(kind, to: grantID), grantID: grantID)
    }

    private func newGrant(clientID: String, subject: String, offline: Bool, openID: Bool) -> String {
        let id = UUID().uuidString.lowercased()
        grants[id] = Grant(report: SandboxGrantReport(id: id, clientID: clientID, subject: subject), offline: offline, openID: openID)
        grantOrder.append(id)
        return id
    }

    func report(_ grantID: String) -> SandboxGrantReport? { grants[grantID]?.report }
    func reports() -> [SandboxGrantReport] { grantOrder.compactMap { grants[$0]?.report } }
    func currentStatistics() -> SandboxStatistics { statistics }

    func storeIdentityToken(_ token: String, expiresAt: Date, for grantID: String) {
        grants[grantID]?.identityToken = (token, expiresAt)
    }

    /// Records a call and its answer, on the grant it concerns when one is known.
    func record(endpoint: String, status: Int, error: String?, grantID: String?, now: Date, rejection: String? = nil) {
        statistics.count(endpoint: endpoint, status: status, error: error, rejection: rejection)
        if let grantID {
            grants[grantID]?.report.calls.append(SandboxCall(endpoint: endpoint, status: status, at: now.timeIntervalSince1970, error: error))
        }
    }

    /// What a call needs before its real work: the faults, the grant of the code or token, and
    /// the client's registered secret.
    func lookup(clientID: String?, credential: String?) -> (faults: SandboxFaults, grantID: String?, secret: String?) {
        (faults, credential.flatMap { codes[$0] ?? tokens[$0]?.grantID }, clientID.flatMap { clients[$0] })
    }

    /// What `/token` answers.
    enum Answer {
        case tokens(Issued)
        /// An OAuth error: status, `error`, `error_description`.
        case refused(status: Int, error: String, description: String)
    }

    struct Issued {
        var accessToken: String
        var refreshToken: String?
        var grantID: String
        var subject: String
        var openID: Bool
        /// The grant's identity token when one is kept that is still good.
        var identityToken: String?
    }

    func exchange(code: String, clientID: String, redirectURI: String?, now: Date, identityTokenValidAfter: Date) -> Answer {
        guard let grantID = codes[code], let grant = grants[grantID] else {
            return refused(nil, "invalid_grant", "Malformed auth code.", now)
        }
        let refusal: (String, String)? =
            if grant.report.clientID != clientID {
                ("invalid_grant", "Unauthorized")
            } else if grant.codeUsed {
                ("invalid_grant", "Bad Request")
            } else if let expiry = grant.codeExpiresAt, expiry <= now {
                ("invalid_grant", "Bad Request")
            } else if grant.codeRedirectURI != redirectURI {
                ("redirect_uri_mismatch", "Bad Request")
            } else {
                nil
            }
        if let (error, description) = refusal {
            grants[grantID]?.report.rejectedCodeExchanges += 1
            return refused(grantID, error, description, now)
        }
        grants[grantID]?.codeUsed = true
        grants[grantID]?.report.codeExchanges += 1
        let refresh = grant.offline ? addToken(.refresh, to: grantID) : nil
        grants[grantID]?.refreshToken = refresh
        return issued(grantID, refreshToken: refresh, now: now, identityTokenValidAfter: identityTokenValidAfter)
    }

    func refresh(token: String, clientID: String, now: Date, identityTokenValidAfter: Date) -> Answer {
        guard let entry = tokens[token], entry.kind == .refresh, let grant = grants[entry.grantID] else {
            return refused(nil, "invalid_grant", "Bad Request", now)
        }
        guard grant.report.clientID == clientID else {
            grants[entry.grantID]?.report.rejectedValidations += 1
            return refused(entry.grantID, "unauthorized_client", "Unauthorized", now, status: 401)
        }
        guard !grant.report.revoked else {
            grants[entry.grantID]?.report.rejectedValidations += 1
            return refused(entry.grantID, "invalid_grant", "Token has been expired or revoked.", now)
        }
        grants[entry.grantID]?.report.validations += 1
        return issued(entry.grantID, refreshToken: nil, now: now, identityTokenValidAfter: identityTokenValidAfter)
    }

    private func refused(_ grantID: String?, _ error: String, _ description: String, _ now: Date, status: Int = 400) -> Answer {
        record(endpoint: "/token", status: status, error: error, grantID: grantID, now: now)
        return .refused(status: status, error: error, description: description)
    }

    private func issued(_ grantID: String, refreshToken: String?, now: Date, identityTokenValidAfter: Date) -> Answer {
        record(endpoint: "/token", status: 200, error: nil, grantID: grantID, now: now)
        let grant = grants[grantID]
        let cached = grant?.identityToken.flatMap { $0.expiresAt > identityTokenValidAfter ? $0.token : nil }
        return .tokens(
            Issued(
                accessToken: addToken(.access, to: grantID),
                refreshToken: refreshToken,
                grantID: grantID,
                subject: grant?.report.subject ?? "",
                openID: grant?.openID ?? false,
                identityToken: cached
            )
        )
    }

    /// Revokes the grant behind a live token, as Google does for either kind; false (Google's
    /// `invalid_token`) when the token is unknown or its grant already ended.
    func revoke(token: String, now: Date) -> Bool {
        let grantID = tokens[token]?.grantID
        if let grantID { grants[grantID]?.report.revokeCalls += 1 }
        guard let grantID, let grant = grants[grantID], !grant.report.revoked else {
            record(endpoint: "/revoke", status: 400, error: "invalid_token", grantID: grantID, now: now)
            return false
        }
        record(endpoint: "/revoke", status: 200, error: nil, grantID: grantID, now: now)
        grants[grantID]?.report.revoked = true
        grants[grantID]?.report.revocations += 1
        return true
    }

    /// Ends every grant of `subject` at the client without a revoke call: the user removed the
    /// app's access or their account is gone. Returns how many were live.
    @discardableResult
    func userEndedGrants(subject: String, clientID: String?) -> Int {
        var ended = 0
        for id in grantOrder where grants[id]?.report.subject == subject && (clientID == nil || grants[id]?.report.clientID == clientID) {
            if grants[id]?.report.revoked == false { ended += 1 }
            grants[id]?.report.revoked = true
            grants[id]?.report.revokedByUser = true
        }
        return ended
    }

    private func addToken(_ kind: TokenKind, to grantID: String) -> String {
        let token = (kind == .refresh ? "1//0" : "ya29.") + SandboxRandom.hex()
        tokens[token] = (grantID, kind)
        return token
    }
}
