import Foundation

extension AuditReceipt {
    /// A printable page of the receipt: the summary, every event, and how to check it. The
    /// JSON file is the evidence; this page is for reading.
    public func html() -> String {
        func text(_ value: String?) -> String { Self.escape(value ?? "—") }
        let calls = summary.appleCalls.map { call in
            "<tr><td>\(text(call.at))</td><td>\(text(call.endpoint))</td><td>\(text(call.httpStatus.map(String.init)))</td>"
                + "<td>\(text(call.providerError))</td><td>\(text(call.latencyMilliseconds.map { "\($0) ms" }))</td></tr>"
        }
        let rows = events.map { event in
            let row = event.row
            return "<tr><td>\(row.chainSeq)</td><td>\(text(WireFormat.timestamp(micros: row.occurredAtMicros)))</td><td>\(text(row.event))</td>"
                + "<td>\(text(row.actor))</td><td>\(text(row.providerEndpoint))</td><td>\(text(row.httpStatus.map(String.init)))</td>"
                + "<td>\(text(row.detail))</td><td class=\"hash\">\(text(String(event.hash.prefix(16))))…</td>"
                + "<td>\(event.checkpoint)</td></tr>"
        }
        let proofs = checkpoints.map { checkpoint in
            "<tr><td>\(checkpoint.seq)</td><td>\(text(WireFormat.timestamp(micros: checkpoint.createdAtMicros)))</td><td>\(checkpoint.rowCount)</td>"
                + "<td class=\"hash\">\(text(checkpoint.merkleRoot))</td><td>\(text(checkpoint.keyID))</td></tr>"
        }
        return """
            <!doctype html>
            <html lang="en">
            <head>
            <meta charset="utf-8">
            <meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Revocation receipt \(text(summary.requestID))</title>
            <style>
            body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; padding: 0 1rem; color: #111; }
            h1 { font-size: 1.4rem; } h2 { font-size: 1.1rem; margin-top: 2rem; }
            table { border-collapse: collapse; width: 100%; } th, td { border: 1px solid #bbb; padding: .3rem .5rem; text-align: left; vertical-align: top; }
            th { background: #eee; } dt { font-weight: 600; } dd { margin: 0 0 .5rem 0; }
            .hash { font-family: ui-monospace, monospace; word-break: break-all; }
            @media print { body { margin: 0; max-width: none; } }
            </style>
            </head>
            <body>
            <h1>Revocation receipt</h1>
            <dl>
            <dt>Request</dt><dd class="hash">\(text(summary.requestID))</dd>
            <dt>App (client_id)</dt><dd>\(text(summary.clientID))</dd>
            <dt>External reference</dt><dd>\(text(summary.externalReference))</dd>
            <dt>Apple user id</dt><dd>\(text(summary.userID))</dd>
            <dt>Requested</dt><dd>\(text(summary.requestedAt)) by \(text(summary.requestedBy))</dd>
            <dt>Outcome</dt><dd>\(text(summary.outcome)) at \(text(summary.finishedAt))</dd>
            <dt>Issued</dt><dd>\(text(issuedAt)), signed by key \(text(keyID))</dd>
            </dl>
            <h2>Calls to Apple</h2>
            <table><thead><tr><th>At</th><th>Endpoint</th><th>HTTP status</th><th>Apple's error</th><th>Latency</th></tr></thead>
            <tbody>\(calls.joined(separator: "\n"))</tbody></table>
            <h2>Audit events</h2>
            <table><thead><tr><th>#</th><th>At</th><th>Event</th><th>Actor</th><th>Endpoint</th><th>Status</th><th>Detail</th><th>Hash</th><th>Checkpoint</th></tr></thead>
            <tbody>\(rows.joined(separator: "\n"))</tbody></table>
            <h2>Signed checkpoints</h2>
            <table><thead><tr><th>#</th><th>Taken</th><th>Rows</th><th>Merkle root</th><th>Key</th></tr></thead>
            <tbody>\(proofs.joined(separator: "\n"))</tbody></table>
            <p>This page renders the receipt's JSON file, which is the evidence. Check that file offline with the
            service's public key: <code>revoker audit verify-receipt receipt.json --public-key audit-public-key.pem</code>.</p>
            </body>
            </html>

            """
    }

    static func escape(_ value: String) -> String { HTMLEscaping.escape(value) }
}
