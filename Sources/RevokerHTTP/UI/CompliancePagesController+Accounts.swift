import Foundation
import Hummingbird
import RevokerStore

/// An account's page: the grants held for it and its deletions, as the key's apps allow.
extension CompliancePagesController {
    /// At most this many grants and deletions on an account's page (the oldest grants and the
    /// newest deletions).
    static let accountGrantLimit = 500
    static let accountDeletionLimit = 100

    private struct AccountForm: Decodable {
        var reference: String?
    }

    /// `GET /ui/accounts?reference=…`, the search page's account form: to the account's page.
    func accountSearch(_ request: Request) throws -> Response {
        let form: AccountForm
        do {
            form = try URLEncodedFormDecoder().decode(AccountForm.self, from: request.uri.query ?? "")
        } catch {
            throw APIProblem.badRequest("The account could not be read: use the form.")
        }
        let reference = form.reference?.trimmingCharacters(in: .whitespaces) ?? ""
        guard !reference.isEmpty else { throw APIProblem.badRequest("Type the account's reference.") }
        return .redirect(to: "/ui/accounts/" + UIFormat.percentEncoded(reference))
    }

    /// `GET /ui/accounts/{reference}`: 404 when the key sees neither a grant nor a deletion of
    /// the account, whether or not other apps have some.
    func accountPage(_ reference: String, _ visitor: UIVisitor) async throws -> Response {
        let (grants, deletions) = try await store { [queue, logger, filter = visitor.caller.filter] in
            async let grants = queue.custody.grants(
                accountReference: reference,
                clientIDs: filter,
                limit: Self.accountGrantLimit + 1,
                logger: logger
            )
            async let deletions = queue.deletions.ofAccount(
                reference,
                clientIDs: filter,
                limit: Self.accountDeletionLimit + 1,
                logger: logger
            )
            return try await (grants, deletions)
        }
        guard !grants.isEmpty || !deletions.isEmpty else {
            throw APIProblem.notFound("Revoker holds no grant and no deletion of this account for the apps this key reaches.")
        }
        let shownGrants = grants.prefix(Self.accountGrantLimit)
        let shownDeletions = deletions.prefix(Self.accountDeletionLimit)
        func link(_ id: UUID?) -> String? { id.map { $0.uuidString.lowercased() } }
        let view = UIAccountView(
            frame: UIFrame(visitor),
            reference: reference,
            accountPath: UIFormat.percentEncoded(reference),
            grants: shownGrants.map { grant in
                UIAccountView.Grant(
                    id: grant.id.uuidString.lowercased(),
                    provider: grant.provider,
                    clientID: grant.clientID,
                    userID: grant.userID ?? "not known yet",
                    kind: grant.registeredKind.rawValue,
                    state: grant.state.rawValue,
                    stateClass: UIFormat.grantStateClass(grant.state),
                    endReason: grant.endReason ?? "—",
                    since: UIFormat.time(grant.heldAt ?? grant.createdAt),
                    endedAt: UIFormat.time(grant.endedAt),
                    holdRequest: link(grant.holdRequestID),
                    revokeRequest: link(grant.revokeRequestID)
                )
            },
            grantCount: shownGrants.count,
            oneGrant: shownGrants.count == 1,
            hasGrants: !shownGrants.isEmpty,
            grantsTruncated: grants.count > shownGrants.count,
            deletions: shownDeletions.map { deletion in
                // Only the apps the key reaches are named; nil covers every app.
                let apps = deletion.clientIDs.map { $0.filter(visitor.caller.reaches).joined(separator: ", ") } ?? "every app"
                return UIAccountView.Deletion(
                    id: deletion.id.uuidString.lowercased(),
                    requestedAt: UIFormat.time(deletion.requestedAt),
                    requestedBy: deletion.requestedBy,
                    apps: apps,
                    state: deletion.state.rawValue,
                    outcome: deletion.outcome?.rawValue ?? "in progress",
                    outcomeClass: UIFormat.deletionOutcomeClass(deletion.outcome),
                    completedAt: UIFormat.time(deletion.completedAt),
                    grants: deletion.grants.count,
                    credentialRequests: deletion.requests.filter { $0.grantID == nil }.map { $0.id.uuidString.lowercased() },
                    receipt: deletion.state == .completed && audits.auditSigner != nil
                )
            },
            deletionCount: shownDeletions.count,
            oneDeletion: shownDeletions.count == 1,
            hasDeletions: !shownDeletions.isEmpty,
            deletionsTruncated: deletions.count > shownDeletions.count
        )
        return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-account"))
    }
}
