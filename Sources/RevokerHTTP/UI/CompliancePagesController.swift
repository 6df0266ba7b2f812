import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PostgresNIO
import RevokerEvidence
import RevokerStore

/// The compliance pages under `/ui/` (`http.ui`): server-rendered HTML without scripts, for
/// people who answer "was this user's grant revoked, when, and how?".
struct CompliancePagesController {
    let ui: UISettings
    let keys: APIKeys
    let database: PostgresClient
    let queue: RevocationQueue
    let audit: AuditLog
    /// Issues the receipts the pages offer.
    let audits: AuditController
    let store: DatabaseDeadline
    let logger: Logger

    func addRoutes(to router: Router<APIRequestContext>) {
        let pages = router.group("ui").add(middleware: UIMiddleware<APIRequestContext>(secure: ui.isSecure))
        let gate = UISessionGate(
            settings: ui,
            keys: keys,
            sessions: UISessions(client: database, logger: logger),
            databaseTimeout: store.limit
        )
        pages.get { request, _ in
            try await gate.session(request) == nil
                ? Response.redirect(to: "/ui/sign-in") : Response.redirect(to: "/ui/search")
        }
        pages.get("style.css") { _, _ in
            Response(
                status: .ok,
                headers: [.contentType: "text/css; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: UITemplates.stylesheet))
            )
        }
        pages.get("sign-in") { request, _ in try await self.signInPage(request, gate: gate) }
        pages.post("sign-in") { request, context in try await self.signIn(request, context: context, gate: gate) }
        pages.post("sign-out") { request, _ in try await self.signOut(request, gate: gate) }
        pages.get("search") { request, context in
            try await gate.signedIn(request) { try await self.searchPage(request, context: context, $0) }
        }
        pages.get("search.csv") { request, context in
            try await gate.signedIn(request) { try await self.searchExport(request, context: context, $0) }
        }
        pages.get("status") { request, _ in
            try await gate.signedIn(request) { try await self.statusPage($0) }
        }
        pages.get("accounts") { request, _ in
            try await gate.signedIn(request) { _ in try self.accountSearch(request) }
        }
        pages.get("accounts/{reference}") { request, context in
            try await gate.signedIn(request) { try await self.accountPage(try DeletionsController.reference(context), $0) }
        }
        pages.get("deletions/{id}/receipt.json") { request, context in
            try await gate.signedIn(request) { visitor in
                let id = try APIResponse.id(context)
                return try AuditController.receiptDownload(try await audits.issueAccountReceipt(id, for: visitor.caller), id: id)
            }
        }
        pages.get("requests/{id}") { request, context in
            try await gate.signedIn(request) { try await self.requestPage(try APIResponse.id(context), $0) }
        }
        pages.get("requests/{id}/events.csv") { request, context in
            try await gate.signedIn(request) { visitor in
                let id = try APIResponse.id(context)
                let records = try await self.timeline(id, visitor.caller)
                return UIPage.download(
                    AuditExport.csv(records),
                    type: "text/csv; charset=utf-8",
                    filename: "revocation-\(id.uuidString.lowercased())-events.csv"
                )
            }
        }
        pages.get("requests/{id}/receipt.json") { request, context in
            try await gate.signedIn(request) { visitor in
                let id = try APIResponse.id(context)
                return try AuditController.receiptDownload(try await audits.issueReceipt(id, for: visitor.caller), id: id)
            }
        }
        pages.get("requests/{id}/receipt.html") { request, context in
            try await gate.signedIn(request) { visitor in
                AuditController.receiptPage(try await audits.issueReceipt(try APIResponse.id(context), for: visitor.caller))
            }
        }
    }

    // MARK: Signing in and out

    func signInPage(_ request: Request, gate: UISessionGate, error: APIProblem? = nil) async throws -> Response {
        if error == nil, try await gate.session(request) != nil { return .redirect(to: "/ui/search") }
        let token = UISessionGate.randomToken()
        let notice = request.uri.queryParameters["signed_out"] != nil ? "You are signed out." : nil
        let view = UISignInView(csrf: token, notice: error == nil ? notice : nil, error: error?.detail)
        var response = UIPage.html(try UITemplates.shared.get().render(view, page: "ui-sign-in"), status: error?.status ?? .ok)
        response.setCookie(gate.signInCookie(token))
        return response
    }

    func signIn(_ request: Request, context: APIRequestContext, gate: UISessionGate) async throws -> Response {
        try gate.requireSameOrigin(request)
        let client = SignInThrottle.client(context.remoteAddress)
        // A refused address is not even checked: its key might be right, and saying so would
        // let the guessing go on.
        if let wait = await gate.throttle.refusal(for: client) {
            return try await throttled(request, gate: gate, for: wait)
        }
        let form = try await UISessionGate.form(request, UISignInForm.self)
        guard let expected = request.cookies[gate.signInCookieName]?.value, let presented = form.csrf,
            APIKeys.constantTimeEqual(Array(expected.utf8), Array(presented.utf8))
        else {
            return try await signInPage(request, gate: gate, error: APIProblem(.forbidden, "The sign-in form expired: sign in again."))
        }
        guard let secret = form.apiKey, !secret.isEmpty, let key = keys.key(presented: secret) else {
            logger.notice("Compliance pages: sign-in refused, unknown key")
            await signInFailed(client, gate: gate)
            return try await signInPage(request, gate: gate, error: APIProblem(.unauthorized, "The API key is not known."))
        }
        let caller: APICaller
        do {
            caller = try APIKeys.caller(key, .auditRead)
        } catch let problem as APIProblem {
            logger.notice("Compliance pages: sign-in refused, no audit:read", metadata: ["revoker.api_key": "\(key.name)"])
            await signInFailed(client, gate: gate)
            return try await signInPage(request, gate: gate, error: problem)
        }
        await gate.throttle.succeeded(client)
        let cookie = try await gate.open(for: key)
        var response = Response.redirect(to: "/ui/search")
        response.setCookie(cookie)
        response.setCookie(gate.signInCookie("", maxAge: 0))
        logger.notice("Compliance pages: signed in", metadata: ["revoker.api_key": "\(caller.name)"])
        return response
    }

    /// Counts a failed sign-in, and says so once when the address is refused from now on.
    func signInFailed(_ client: String, gate: UISessionGate) async {
        if let lockout = await gate.throttle.failed(client) {
            logger.notice(
                "Compliance pages: sign-ins refused from an address after repeated failures",
                metadata: ["client.address": "\(client)", "revoker.retry_after_seconds": "\(lockout.components.seconds)"]
            )
        }
    }

    /// 429 with `Retry-After`, as the sign-in page.
    func throttled(_ request: Request, gate: UISessionGate, for wait: Duration) async throws -> Response {
        let seconds = wait.components.seconds + (wait.components.attoseconds > 0 ? 1 : 0)
        let minutes = (seconds + 59) / 60
        let problem = APIProblem(
            .tooManyRequests,
            "Too many failed sign-ins from this address: try again in \(minutes) minute\(minutes == 1 ? "" : "s")."
        )
        var response = try await signInPage(request, gate: gate, error: problem)
        response.headers[.retryAfter] = "\(seconds)"
        return response
    }

    func signOut(_ request: Request, gate: UISessionGate) async throws -> Response {
        try gate.requireSameOrigin(request)
        let form = try await UISessionGate.form(request, UISignOutForm.self)
        guard let visitor = try await gate.session(request) else { return .redirect(to: "/ui/sign-in") }
        guard let presented = form.csrf, APIKeys.constantTimeEqual(Array(visitor.session.csrfToken.utf8), Array(presented.utf8)) else {
            throw APIProblem(.forbidden, "The form did not come from this session: reload the page and sign out again.")
        }
        try await gate.close(visitor)
        var response = Response.redirect(to: "/ui/sign-in?signed_out=1")
        response.setCookie(gate.sessionCookie("", maxAge: 0))
        return response
    }

    // MARK: Pages

    func searchPage(_ request: Request, context: APIRequestContext, _ visitor: UIVisitor) async throws -> Response {
        let form = try UISearchForm(request, context: context)
        var view = UISearchView(
            frame: UIFrame(visitor),
            reference: form.reference ?? "",
            userID: form.userID ?? "",
            clientID: form.clientID ?? "",
            from: form.fromText ?? "",
            to: form.toText ?? "",
            outcomes: UISearchForm.outcomes.map { .init(value: $0, selected: $0 == form.outcome) },
            query: form.queryString(),
            error: nil,
            requests: [],
            count: 0,
            one: false,
            hasRequests: false,
            hasMore: false
        )
        do {
            let search = try form.search(for: visitor.caller, limit: 50)
            let page = try await store { [audit = AuditRequests(client: database, logger: logger)] in try await audit.search(search) }
            view.requests = page.requests.map { found in
                UISearchView.Row(
                    id: found.requestID.uuidString.lowercased(),
                    requestedAt: UIFormat.time(found.requestedAt),
                    reference: found.externalReference ?? "—",
                    accountPath: found.externalReference.map(UIFormat.percentEncoded),
                    clientID: found.clientID ?? "—",
                    userID: found.userID ?? "—",
                    outcome: found.outcome ?? "in progress",
                    outcomeClass: UIFormat.outcomeClass(found.outcome),
                    archive: found.archive
                )
            }
            view.count = view.requests.count
            view.one = view.count == 1
            view.hasRequests = view.count > 0
            view.hasMore = page.nextCursor != nil
            view.next = page.nextCursor.map { form.queryString(cursor: $0) }
        } catch let problem as APIProblem where problem.status == .badRequest || problem.status == .forbidden {
            view.error = problem.detail
            return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-search"), status: problem.status)
        } catch let error as RevokerStoreError where error.code == .invalidArgument {
            view.error = "The page link is not one these pages made: search again."
            return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-search"), status: .badRequest)
        }
        return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-search"))
    }

    /// Every request the search finds as CSV, streamed a page at a time: a month of years of
    /// history is sent in constant memory. The first page is read before the answer starts, so
    /// a refused search or a database that cannot answer still gets its status; a failure later
    /// cuts the transfer short, which the client sees as an incomplete download.
    func searchExport(_ request: Request, context: APIRequestContext, _ visitor: UIVisitor) async throws -> Response {
        let form = try UISearchForm(request, context: context)
        var search = try form.search(for: visitor.caller, limit: 1000)
        search.cursor = nil
        let requests = AuditRequests(client: database, logger: logger)
        let first = try await store { [search] in try await requests.search(search) }
        let columns = [
            "request_id", "requested_at", "requested_by", "client_id", "external_reference", "apple_user_id", "outcome", "finished_at",
            "evidence_archive",
        ]
        @Sendable func csv(_ page: AuditRequestPage) -> ByteBuffer {
            var text = ""
            for found in page.requests {
                let values = [
                    found.requestID.uuidString.lowercased(), WireFormat.timestamp(found.requestedAt), found.requestedBy,
                    found.clientID ?? "", found.externalReference ?? "", found.userID ?? "", found.outcome ?? "",
                    found.finishedAt.map(WireFormat.timestamp) ?? "", found.archive ?? "",
                ]
                text += values.map(AuditExport.csvField).joined(separator: ",") + "\r\n"
            }
            return ByteBuffer(string: text)
        }
        let stamp = WireFormat.timestamp(Date()).prefix(19).replacingOccurrences(of: ":", with: "")
        let body = ResponseBody { [search] writer in
            var search = search
            try await writer.write(ByteBuffer(string: columns.joined(separator: ",") + "\r\n"))
            var page = first
            while true {
                try await writer.write(csv(page))
                guard let next = page.nextCursor else { break }
                search.cursor = next
                page = try await requests.search(search)
            }
            try await writer.finish(nil)
        }
        return Response(
            status: .ok,
            headers: [
                .contentType: "text/csv; charset=utf-8", .contentDisposition: "attachment; filename=\"revocations-\(stamp).csv\"",
            ],
            body: body
        )
    }

    /// A request's events, oldest first (at most ``UIRequestView`` shows; the CSV has all).
    func timeline(_ id: UUID, _ caller: APICaller) async throws -> [AuditRecord] {
        var query = AuditQuery(requestID: id, limit: 1000)
        query.clientIDs = caller.filter
        var records: [AuditRecord] = []
        repeat {
            let page = try await store { [audit, query] in try await audit.query(query) }
            records += page.records
            query.cursor = page.nextCursor
        } while query.cursor != nil && records.count < 10_000
        guard !records.isEmpty else {
            let requests = AuditRequests(client: database, logger: logger)
            if let archived = try await store({ try await requests.archive(of: id) }) {
                throw APIProblem.notFound(
                    "This request's audit rows were archived on \(UIFormat.time(archived.archivedAt)) to \(archived.file) "
                        + "(sha256 \(archived.sha256.hex)): `revoker audit receipt \(id.uuidString.lowercased()) --archive \(archived.file)` "
                        + "issues its receipt from that file."
                )
            }
            throw APIProblem.notFound("The audit trail has no revocation with this id.")
        }
        return records
    }

    func requestPage(_ id: UUID, _ visitor: UIVisitor) async throws -> Response {
        let records = try await timeline(id, visitor.caller)
        let enqueued = records.first { $0.event == AuditEventKind.enqueued.rawValue }
        let final = records.last { AuditReceipt.finalEvents.contains($0.event) }
        // As the search states it: a final event without an outcome shows as that event.
        let outcome = final.map { AuditReceipt.outcome(event: $0.event, detail: $0.detail) ?? $0.event }
        let shown = records.prefix(500)
        let view = UIRequestView(
            frame: UIFrame(visitor),
            id: id.uuidString.lowercased(),
            outcome: outcome ?? "in progress",
            outcomeClass: UIFormat.outcomeClass(outcome),
            clientID: records.first?.clientID ?? "—",
            reference: records.first?.externalReference ?? "—",
            accountPath: records.first?.externalReference.map(UIFormat.percentEncoded),
            userID: records.last { $0.userID != nil }?.userID ?? "—",
            requestedAt: UIFormat.time(enqueued?.occurredAt),
            requestedBy: enqueued?.actor ?? "—",
            finishedAt: UIFormat.time(final?.occurredAt),
            receipts: audits.auditSigner != nil,
            events: shown.map { record in
                UIRequestView.Event(
                    at: UIFormat.time(record.occurredAt),
                    event: record.event,
                    actor: record.actor,
                    apple: record.providerEndpoint.map {
                        .init(
                            endpoint: $0,
                            status: record.httpStatus.map(String.init) ?? "none",
                            error: record.providerError,
                            latency: record.latencyMilliseconds.map(String.init)
                        )
                    },
                    detail: record.detail
                )
            },
            truncated: records.count > shown.count,
            shown: shown.count
        )
        return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-request"))
    }

    func statusPage(_ visitor: UIVisitor) async throws -> Response {
        let since = Date().addingTimeInterval(-24 * 3600)
        let (statistics, paused, failures) = try await store { [queue, database, logger, filter = visitor.caller.filter] in
            async let statistics = queue.statistics(clientIDs: filter)
            async let paused = queue.pausedApps()
            async let failures = AuditRequests(client: database, logger: logger).failures(since: since, clientIDs: filter)
            return try await (statistics, paused, failures.map { UIStatusView.Failure(outcome: $0.outcome, count: $0.count) })
        }
        let visible = paused.filter { visitor.caller.reaches($0.clientID) }
        let oldest = statistics.oldestDueAge.components.seconds
        let view = UIStatusView(
            frame: UIFrame(visitor),
            now: UIFormat.time(Date()),
            queueDepth: (statistics.byState[.pending] ?? 0) + (statistics.byState[.running] ?? 0),
            oldestDue: oldest == 0 ? "none" : UIFormat.age(oldest),
            pausedCount: visible.count,
            paused: visible.map {
                .init(
                    clientID: $0.clientID,
                    reason: $0.reason.code + ($0.reason.description.map { ": \($0)" } ?? ""),
                    pausedAt: UIFormat.time($0.pausedAt),
                    nextProbeAt: UIFormat.time($0.nextProbeAt)
                )
            },
            hasPaused: !visible.isEmpty,
            failures: failures,
            hasFailures: !failures.isEmpty
        )
        return UIPage.html(try UITemplates.shared.get().render(view, page: "ui-status"))
    }
}
