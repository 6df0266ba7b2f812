import Foundation
import ProviderSandbox

/// Everything the Facebook sandbox knows: apps and their secrets, and each person's login to an
/// app with its tokens. One actor keeps each call's check-and-update atomic.
actor FacebookSandboxState: SandboxRecords {
    struct App {
        var secret: String
        /// "Require App Secret": every Graph call carries a matching `appsecret_proof`.
        var requiresProof: Bool
    }

    struct Grant {
        var report: SandboxGrantReport
        /// The user access token of a classic login; nil for Limited Login.
        var accessToken: String?
        var issuedAt: Date
        var expiresAt: Date
    }

    private(set) var apps: [String: App] = [:]
    private var grants: [String: Grant] = [:]
    private var grantOrder: [String] = []
    private var tokens: [String: String] = [:]
    /// Limited Login tokens by value, to their grant.
    private var identityTokens: [String: String] = [:]
    private(set) var faults: SandboxFaults
    /// Faults of the published keys alone.
    private(set) var keyFaults = SandboxFaults.none
    private var statistics = SandboxStatistics()

    init(faults: SandboxFaults) {
        self.faults = faults
    }

    func register(appID: String, secret: String, requiresProof: Bool) { apps[appID] = App(secret: secret, requiresProof: requiresProof) }
    func setFaults(_ faults: SandboxFaults) { self.faults = faults }
    func setKeyFaults(_ faults: SandboxFaults) { self.keyFaults = faults }

    /// A person's login to an app: a user access token (classic) or none (Limited Login).
    func signIn(appID: String, userID: String, accessToken: Bool, lifetime: TimeInterval, now: Date) -> SandboxAdmin.Minted {
        let id = UUID().uuidString.lowercased()
        let token = accessToken ? "EAA" + SandboxRandom.hex() + SandboxRandom.hex() : nil
        grants[id] = Grant(
            report: SandboxGrantReport(id: id, clientID: appID, subject: userID),
            accessToken: token,
            issuedAt: now,
            expiresAt: now.addingTimeInterval(lifetime)
        )
        grantOrder.append(id)
        if let token { tokens[token] = id }
        return SandboxAdmin.Minted(value: token ?? "", grantID: id)
    }

    func report(_ grantID: String) -> SandboxGrantReport? { grants[grantID]?.report }
    func reports() -> [SandboxGrantReport] { grantOrder.compactMap { grants[$0]?.report } }
    func currentStatistics() -> SandboxStatistics { statistics }

    func record(endpoint: String, status: Int, error: String?, grantID: String?, now: Date, rejection: String? = nil) {
        statistics.count(endpoint: endpoint, status: status, error: error, rejection: rejection)
        if let grantID {
            grants[grantID]?.report.calls.append(SandboxCall(endpoint: endpoint, status: status, at: now.timeIntervalSince1970, error: error))
        }
    }

    /// Remembers the Limited Login token a sign-in issued.
    func issued(identityToken: String, grantID: String) { identityTokens[identityToken] = grantID }

    /// The grant of a Limited Login token the sandbox issued, when it belongs to `appID`.
    func identityGrant(_ token: String) -> Grant? { identityTokens[token].flatMap { grants[$0] } }

    /// The app uninstalled for the person of a Limited Login grant: counted once as a revocation.
    func uninstall(_ token: String) -> String? {
        guard let id = identityTokens[token] else { return nil }
        grants[id]?.report.revokeCalls += 1
        if grants[id]?.report.revoked == false {
            grants[id]?.report.revoked = true
            grants[id]?.report.revocations += 1
        }
        return id
    }

    /// What `debug_token` finds of a user access token: its grant, or nil when Facebook never issued it.
    func token(_ value: String) -> Grant? { tokens[value].flatMap { grants[$0] } }

    /// The grant a user access token belongs to.
    func grantID(of token: String?) -> String? { token.flatMap { tokens[$0] } }

    /// Counts a debug_token of a grant's token: live, or refused.
    func countValidation(_ grantID: String, live: Bool) {
        if live { grants[grantID]?.report.validations += 1 } else { grants[grantID]?.report.rejectedValidations += 1 }
    }

    /// Removes the app's login for the person: every grant of theirs at the app ends. Returns the
    /// grants it touched, and counts one revocation on each that was live.
    func removeLogin(appID: String, userID: String) -> [String] {
        let touched = grantOrder.filter { grants[$0]?.report.clientID == appID && grants[$0]?.report.subject == userID }
        for id in touched {
            grants[id]?.report.revokeCalls += 1
            if grants[id]?.report.revoked == false {
                grants[id]?.report.revoked = true
                grants[id]?.report.revocations += 1
            }
        }
        return touched
    }

    /// The person removed the app in their Facebook settings: their grants end without a call.
    func userRemovedApp(appID: String, userID: String) -> Int {
        var ended = 0
        for id in grantOrder where grants[id]?.report.clientID == appID && grants[id]?.report.subject == userID {
            if grants[id]?.report.revoked == false { ended += 1 }
            grants[id]?.report.revoked = true
            grants[id]?.report.revokedByUser = true
        }
        return ended
    }
}
