import AppleSignInSandbox
import Foundation
import GoogleSignInSandbox
import ProviderSandbox
import RevokerApp
import RevokerHTTP
import RevokerLocalStack
import RevokerProvider
import RevokerStore

extension Demo {
    /// One sign-in the backend hands over: which account, which provider, the code it got.
    struct SignIn: Sendable {
        var account: String
        var provider: ProviderName
        var clientID: String
        var subject: String
        var story: String
        var sandboxGrant = ""
        var code = ""
    }

    /// Custody, the whole story: three users sign in and the backend hands Revoker each code
    /// (exchanged at once, the refresh token held); one user revokes consent in Apple's settings
    /// (Apple tells Revoker, the grant dies, its token is erased); later the three accounts are
    /// deleted by their reference alone. Returns how many grants did not end as expected.
    func custody(configuration: RevokerConfiguration, sandbox: RunningSandbox, apple: String, google: String) async throws -> Int {
        var configuration = configuration
        configuration.http.port = 0
        let (output, logger) = (self.output, self.logger)
        return try await RevokerApp(configuration: configuration, parts: [.api, .worker], logger: logger).withRunning { running in
            let queue = running.app.queue
            var signIns = [
                SignIn(account: "acct-2001", provider: .apple, clientID: apple, subject: "002001.demo", story: "signs in with Apple on the iOS app"),
                SignIn(account: "acct-2002", provider: .apple, clientID: apple, subject: "002002.demo", story: "signs in with Apple"),
                SignIn(account: "acct-2002", provider: .google, clientID: google, subject: "110000000000000002002", story: "also links Google"),
                SignIn(account: "acct-2003", provider: .google, clientID: google, subject: "110000000000000002003", story: "signs in with Google"),
            ]
            section("7. Custody: users sign in, and the backend hands Revoker each authorization code at once (as POST /v1/grants does)")
            var grants: [Grant] = []
            for index in signIns.indices {
                let signIn = signIns[index]
                let minted =
                    signIn.provider == .google
                    ? try await sandbox.google.mintCode(.init(clientID: signIn.clientID, subject: signIn.subject))
                    : try await sandbox.admin.mintCode(clientID: signIn.clientID, subject: signIn.subject)
                (signIns[index].sandboxGrant, signIns[index].code) = (minted.grantID, minted.value)
                let registration = try await queue.custody.register(
                    try NewGrant(
                        provider: signIn.provider.rawValue,
                        clientID: signIn.clientID,
                        accountReference: signIn.account,
                        credential: Credential(kind: .authorizationCode, secret: minted.value)
                    ),
                    actor: "demo"
                )
                let grant = try await queue.custody.settled(registration.grant, within: .seconds(30))
                grants.append(grant)
                output(
                    "   \(pad(signIn.account, 10)) \(pad(signIn.provider.rawValue, 7)) \(pad(signIn.story, 34)) → \(grant.state.rawValue), user \(grant.userID ?? "-") (\(grant.userSource?.rawValue ?? "not verified"))"
                )
            }

            let quitter = signIns[1]
            let delivery = try await sandbox.admin.sendNotification(
                .init(
                    url: "http://127.0.0.1:\(running.apiPort ?? 0)/v1/apple/notifications",
                    clientID: quitter.clientID,
                    subject: quitter.subject,
                    type: "consent-revoked"
                )
            )
            let told = try await queue.custody.grant(id: grants[1].id)
            section("8. \(quitter.subject) stops using Apple ID with the app in Settings: Apple notifies Revoker")
            output(
                "   Apple → POST /v1/apple/notifications (consent-revoked): \(delivery.status); \(quitter.account)'s Apple grant is now \(told?.state.rawValue ?? "missing") (\(told?.endReason ?? "-")), its token erased"
            )

            section("9. Months later the three accounts are deleted by their reference alone (as POST /v1/accounts/{reference}/deletion does)")
            var surprises = 0
            for account in ["acct-2001", "acct-2002", "acct-2003"] {
                let asked = try await queue.deletions.request(accountReference: account, actor: "demo")
                let deletion = try await queue.deletions.settled(asked.deletion, within: .seconds(60))
                output("   \(pad(account, 10)) deletion \(deletion.state.rawValue), outcome \(deletion.outcome?.rawValue ?? "-")")
                if deletion.outcome != .revoked { surprises += 1 }
                // Every grant the account ever had: those the deletion revoked, and the one that died before it.
                for grant in try await queue.custody.grants(accountReference: account) {
                    guard let signIn = signIns.first(where: { $0.account == account && $0.provider.rawValue == grant.provider }) else { continue }
                    let record = try await sandbox.admin(for: signIn.provider).grant(signIn.sandboxGrant)
                    // The grant the user revoked in Settings is dead without a call; every other is revoked once.
                    let died = signIn.subject == quitter.subject
                    if grant.state != (died ? .dead : .revoked) || !record.revoked || record.codeExchanges != 1
                        || record.revokeCalls != (died ? 0 : 1)
                    {
                        surprises += 1
                    }
                    output(
                        "     \(pad(grant.provider, 7)) \(pad(grant.clientID, 38)) \(pad(grant.state.rawValue, 8)) \(pad(deletion.outcome(of: grant) ?? "-", 16)) provider: revoked=\(record.revoked) code_exchanges=\(record.codeExchanges) revoke_calls=\(record.revokeCalls)"
                    )
                }
            }
            let feed = EventFeed(client: running.database, logger: logger)
            let events = try await feed.events(after: nil, clientIDs: nil, limit: 1000).filter { $0.type.hasPrefix("account.") }
            output("   Events for the backends: \(events.count) (\(Set(events.map(\.type)).sorted().joined(separator: ", ")))")
            return surprises
        }
    }
}
