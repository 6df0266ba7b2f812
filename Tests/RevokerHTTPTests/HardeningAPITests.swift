import Foundation
import NIOCore
import NIOHTTP1
import RevokerLocalStack
import RevokerStore
import RevokerTesting
import Testing

/// What a security review of `revoker serve` found (issue 10), each held by a test: slow and
/// broken clients, an unreachable database, odd input, and keys limited to some apps.
@Suite("HTTP API: hardening")
struct HardeningAPITests {
    /// Short limits, so that the slow-client tests stay fast; the idle timeout is longer than
    /// the header timeout so that a 408 tells which one fired.
    static let shortTimeouts: [String: any Sendable] = [
        "header_timeout_seconds": 1, "body_timeout_seconds": 1, "idle_timeout_seconds": 5, "max_connections": 3,
    ]

    /// How long a test waits for what a timeout brings about: a guard against a hang, far
    /// above the limits configured, so that a loaded machine is never taken for a regression.
    static let hangGuard: Duration = .seconds(60)
    static let callGuard: TimeAmount = .seconds(60)

    static func port(_ api: APIHarness) throws -> Int { try #require(URL(string: api.baseURL)?.port) }

    static func enqueueHead(_ api: APIHarness, length: Int) -> String {
        "POST /v1/revocations HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer \(api.keys.writer)\r\nContent-Type: application/json\r\n"
            + "Content-Length: \(length)\r\n\r\n"
    }

    // MARK: Slow clients

    @Test func aRequestLineWithoutItsEndIsAnsweredWithATimeout() async throws {
        try await APIHarness.with(http: Self.shortTimeouts) { api in
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send("GET /healthz HTTP/1.1")
            #expect(await connection.closes(within: Self.hangGuard), "the server closed the connection")
            #expect(connection.text.hasPrefix("HTTP/1.1 408"), "answered 408: \(connection.text.prefix(80))")
        }
    }

    @Test func headersSentOneLineAtATimeAreCutOffByTheHeaderTimeout() async throws {
        try await APIHarness.with(http: Self.shortTimeouts) { api in
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: test\r\n")
            // Each line keeps the connection busy for less than the idle timeout; only the
            // header timeout can end it. Lines go on until it does (or the hang guard passes).
            let end = ContinuousClock.now + Self.hangGuard
            var index = 0
            while !(await connection.closes(within: .milliseconds(300))), ContinuousClock.now < end {
                try? await connection.send("X-Slow-\(index): yes\r\n")
                index += 1
            }
            #expect(!connection.channel.isActive, "the server closed the connection")
            #expect(connection.text.hasPrefix("HTTP/1.1 408"), "answered 408: \(connection.text.prefix(80))")
        }
    }

    @Test func anIdleConnectionIsClosed() async throws {
        try await APIHarness.with(http: Self.shortTimeouts) { api in
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            #expect(await connection.closes(within: Self.hangGuard), "closed after the idle timeout")
            #expect(connection.text.hasPrefix("HTTP/1.1 200"), "the request itself was answered: \(connection.text.prefix(80))")
        }
    }

    @Test func aBodyShorterThanItsLengthIsAnswered408AndStoresNothing() async throws {
        try await APIHarness.with(http: Self.shortTimeouts) { api in
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send(Self.enqueueHead(api, length: 200) + #"{"client_id": "com.example.notes","#)
            #expect(await connection.closes(within: Self.hangGuard))
            #expect(connection.text.hasPrefix("HTTP/1.1 408"), "answered 408: \(connection.text.prefix(80))")
            #expect(try await api.storedCount() == 0)
        }
    }

    @Test func aBodyTrickledByteByByteIsCutOffByTheBodyTimeout() async throws {
        try await APIHarness.with(http: Self.shortTimeouts) { api in
            let body = #"{"client_id":"com.example.notes","external_reference":"slow","refresh_token":"r.slow-token"}"#
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send(Self.enqueueHead(api, length: body.utf8.count))
            for character in body {
                if await connection.closes(within: .milliseconds(200)) { break }
                try? await connection.send(String(character))
            }
            #expect(await connection.closes(within: Self.hangGuard))
            #expect(connection.text.hasPrefix("HTTP/1.1 408"), "answered 408: \(connection.text.prefix(80))")
            #expect(try await api.storedCount() == 0)
        }
    }

    @Test func connectionsBeyondTheLimitWaitUntilOneCloses() async throws {
        // The held connections must outlive a loaded machine's pauses: an idle one closed by the
        // server would let the fourth in.
        try await APIHarness.with(http: Self.shortTimeouts.merging(["idle_timeout_seconds": 60]) { $1 }) { api in
            let port = try Self.port(api)
            var held: [RawConnection] = []
            for _ in 0..<3 {
                let connection = try await RawConnection.open(port: port)
                try await connection.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
                held.append(connection)
            }
            // Each of the three is served and stays open.
            for connection in held {
                #expect(await connection.receives(within: Self.hangGuard))
                #expect(connection.text.hasPrefix("HTTP/1.1 200") && connection.channel.isActive)
            }
            let waiting = try await RawConnection.open(port: port)
            try await waiting.send("GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            // A fourth is not served while they are open. (A slow machine can only make this pass
            // when it should not, never fail when it should pass.)
            _ = await waiting.receives(within: .seconds(1))
            #expect(waiting.text.isEmpty, "a fourth connection is not served while three are open")
            await held[0].close()
            #expect(await waiting.receives(within: Self.hangGuard), "served once one closed")
            #expect(waiting.text.hasPrefix("HTTP/1.1 200"), "served once one closed: \(waiting.text.prefix(80))")
            for connection in held { await connection.close() }
            await waiting.close()
        }
    }

    // MARK: Broken framing

    struct Framing: Sendable, CustomTestStringConvertible {
        var name: String
        var request: @Sendable (APIHarness) -> String
        var testDescription: String { name }
    }

    static let brokenFraming: [Framing] = [
        Framing(name: "an impossible chunk size") { api in
            "POST /v1/revocations HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer \(api.keys.writer)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZZZZZZZZZZZZZZZZZZ\r\n{}\r\n0\r\n\r\n"
        },
        Framing(name: "a body shorter than Content-Length, then a half-close") { api in
            enqueueHead(api, length: 100) + #"{"client_id":"#
        },
        Framing(name: "a truncated chunked body, then a half-close") { api in
            "POST /v1/revocations HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer \(api.keys.writer)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{\"client_id\":"
        },
        Framing(name: "Expect: 100-continue and no body") { api in
            "POST /v1/revocations HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer \(api.keys.writer)\r\n"
                + "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 80\r\n\r\n"
        },
    ]

    @Test(arguments: brokenFraming)
    func brokenFramingIsTheClientsFault(_ framing: Framing) async throws {
        try await APIHarness.with { api in
            let connection = try await RawConnection.open(port: try Self.port(api))
            try await connection.send(framing.request(api))
            try? await connection.finishSending()
            #expect(await connection.closes(within: Self.hangGuard))
            #expect(connection.text.hasPrefix("HTTP/1.1 400"), "answered 400: \(connection.text.prefix(80))")
            let loud = api.stack.logs.all.filter { $0.hasPrefix("error") || $0.hasPrefix("critical") }
            #expect(loud.isEmpty, "logged below error: \(loud)")
            #expect(try await api.storedCount() == 0)
        }
    }

    // MARK: The database goes away

    @Test func callsAnswer503SoonWhenTheDatabaseIsDown() async throws {
        try await PrivatePostgres.with { server in
            try await APIHarness.with(http: ["database_timeout_seconds": 5], server: server.url) { api in
                let (_, token) = try await api.mintRefreshToken(subject: "user-down")
                let body: [String: Any] = ["client_id": "com.example.notes", "external_reference": "down-1", "refresh_token": token]
                let created = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body)
                let id = try #require(created.json["id"] as? String)
                try server.stop()
                defer { try? server.start() }
                // The database timeout (5 s) answers 503; the client's timeouts only guard against a hang.
                var again = body
                again["external_reference"] = "down-2"
                let enqueue = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: again, timeout: Self.callGuard)
                #expect(enqueue.status == 503, "\(enqueue.text)")
                #expect(enqueue.headers.first(name: "Retry-After") != nil)
                let shown = try await api.call(.GET, "/v1/revocations/\(id)", key: api.keys.reader, timeout: Self.callGuard)
                #expect(shown.status == 503, "\(shown.text)")
                #expect(shown.headers.first(name: "Retry-After") != nil)
                let audit = try await api.call(.GET, "/v1/audit", key: api.keys.auditor, timeout: Self.callGuard)
                #expect(audit.status == 503, "\(audit.text)")
                try server.start()
            }
        }
    }

    // MARK: Odd input

    @Test func malformedJSONIsRefusedStrictly() async throws {
        try await APIHarness.with { api in
            let bodies = [
                #"{"client_id":"com.example.notes","external_reference":"r","refresh_token":"r.t",}"#,
                #"{"client_id":"com.example.notes","client_id":"com.example.photos","external_reference":"r","refresh_token":"r.t"}"#,
                #"{"client_id":"com.example.notes","external_reference":"r","refresh_token":"r.t"} {}"#,
                #"{"client_id":"com.example.notes","external_reference":"r\ud800","refresh_token":"r.t"}"#,
                #"{"client_id":"com.example.notes","external_reference":"r","refresh_token":"r.t","max_attempts":08}"#,
                #"{'client_id':'com.example.notes'}"#,
            ]
            for body in bodies {
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, body: Data(body.utf8))
                #expect(answer.status == 400, "\(body): \(answer.text)")
            }
            #expect(try await api.storedCount() == 0)
        }
    }

    @Test func invisibleOrMisleadingReferencesAreRefusedNamingTheField() async throws {
        try await APIHarness.with { api in
            for reference in ["   ", "\u{200B}", "user\u{202E}kcatta", "user\u{2028}2", " user", "user\u{A0}", "\u{FEFF}user"] {
                let body: [String: Any] = ["client_id": "com.example.notes", "external_reference": reference, "refresh_token": "r.odd"]
                let answer = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: body)
                #expect(answer.status == 422, "\(reference.unicodeScalars.map { String($0.value, radix: 16) }): \(answer.text)")
                #expect(answer.json["field"] as? String == "external_reference")
            }
            #expect(try await api.storedCount() == 0)
        }
    }

    // MARK: Keys limited to apps

    @Test func aKeyLimitedToOneAppCannotTouchAnother() async throws {
        try await APIHarness.with { api in
            let own: [String: Any] = ["client_id": "com.example.notes", "external_reference": "n-1", "refresh_token": "r.notes-1"]
            let foreign: [String: Any] = ["client_id": "com.example.photos", "external_reference": "p-1", "refresh_token": "r.photos-1"]
            api.stack.secrets.add("r.notes-1")
            api.stack.secrets.add("r.photos-1")
            let refused = try await api.call(.POST, "/v1/revocations", key: api.keys.notesOnly, json: foreign)
            #expect(refused.status == 403 && refused.json["field"] as? String == "client_id", "\(refused.text)")
            let mine = try await api.call(.POST, "/v1/revocations", key: api.keys.notesOnly, json: own)
            #expect(mine.status == 202, "\(mine.text)")
            let theirs = try await api.call(.POST, "/v1/revocations", key: api.keys.writer, json: foreign)
            let theirID = try #require(theirs.json["id"] as? String)

            #expect(try await api.call(.GET, "/v1/revocations/\(theirID)", key: api.keys.notesOnly).status == 404)
            #expect(try await api.call(.POST, "/v1/revocations/\(theirID)/cancel", key: api.keys.notesOnly).status == 404)
            let after = try await api.call(.GET, "/v1/revocations/\(theirID)", key: api.keys.reader)
            #expect(after.json["state"] as? String == "pending", "another app's request is untouched")

            let listed = try await api.call(.GET, "/v1/revocations", key: api.keys.notesOnly)
            let clientIDs = (listed.json["revocations"] as? [[String: Any]] ?? []).compactMap { $0["client_id"] as? String }
            #expect(clientIDs == ["com.example.notes"])
            #expect(try await api.call(.GET, "/v1/revocations?client_id=com.example.photos", key: api.keys.notesOnly).status == 403)
            let audit = try await api.call(.GET, "/v1/audit", key: api.keys.notesOnly)
            let audited = Set((audit.json["records"] as? [[String: Any]] ?? []).compactMap { $0["client_id"] as? String })
            #expect(audited == ["com.example.notes"])
            #expect(try await api.call(.GET, "/v1/audit?client_id=com.example.photos", key: api.keys.notesOnly).status == 403)
        }
    }
}
