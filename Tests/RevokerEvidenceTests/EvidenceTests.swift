import Foundation
import Testing

@testable import RevokerEvidence

@Suite("Audit evidence: Merkle trees, chain hashes, checkpoints")
struct EvidenceTests {
    /// The leaves and roots of RFC 6962's reference implementation (certificate-transparency's
    /// merkle_tree_test), so the tree is checked against someone else's arithmetic.
    static let leaves: [[UInt8]] = [
        [], [0x00], [0x10], [0x20, 0x21], [0x30, 0x31], [0x40, 0x41, 0x42, 0x43],
        [0x50, 0x51, 0x52, 0x53, 0x54, 0x55, 0x56, 0x57],
        [0x60, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b, 0x6c, 0x6d, 0x6e, 0x6f],
    ]
    static let roots = [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]

    @Test func rootsMatchTheReferenceVectors() {
        #expect(MerkleTree.emptyRoot.hex == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        for size in 1...Self.leaves.count {
            #expect(MerkleTree.root(Array(Self.leaves.prefix(size))).hex == Self.roots[size - 1], "size \(size)")
        }
    }

    @Test func everyLeafHasAPathAndNoOtherLeafUsesIt() {
        for size in 1...20 {
            let leaves = (0..<size).map { [UInt8(truncatingIfNeeded: $0), 0xAB] }
            let root = MerkleTree.root(leaves)
            for index in 0..<size {
                let path = MerkleTree.path(for: index, in: leaves)
                #expect(MerkleTree.verify(leaf: leaves[index], index: index, size: size, path: path, root: root), "\(index) of \(size)")
                #expect(!MerkleTree.verify(leaf: [0xFF], index: index, size: size, path: path, root: root))
                if size > 1 {
                    #expect(!MerkleTree.verify(leaf: leaves[index], index: (index + 1) % size, size: size, path: path, root: root))
                }
            }
        }
    }

    static let row = AuditChainRow(
        chainKey: "3f1c0f9e-5a3e-4d5b-9c1e-2b7d6f0a1c2d",
        chainSeq: 2,
        id: 17,
        occurredAtMicros: 1_795_334_400_123_456,
        txid: 742,
        requestID: UUID(uuidString: "3F1C0F9E-5A3E-4D5B-9C1E-2B7D6F0A1C2D"),
        clientID: "com.example.app",
        externalReference: "user-42 ✓",
        userID: nil,
        event: "revoked",
        attempt: 1,
        actor: "worker-1",
        providerEndpoint: "/auth/revoke",
        httpStatus: 200,
        providerError: nil,
        providerErrorDescription: nil,
        latencyMilliseconds: 12,
        detail: nil,
        recordedBy: "revoker_app"
    )

    @Test func aRowsHashCoversEveryField() {
        let previous = [UInt8](repeating: 7, count: 32)
        let hash = Self.row.hash(after: previous)
        #expect(hash.count == 32)
        #expect(Self.row.hash(after: AuditChainRow.genesis) != hash)
        // Each field, changed alone, changes the hash; NULL and "" differ.
        var changed: [AuditChainRow] = []
        for change in [
            { (row: inout AuditChainRow) in row.chainSeq += 1 }, { $0.id += 1 }, { $0.occurredAtMicros += 1 }, { $0.txid += 1 },
            { $0.requestID = nil }, { $0.clientID = "com.example.other" }, { $0.externalReference = "user-43 ✓" },
            { $0.userID = "" }, { $0.event = "failed" }, { $0.attempt = 2 }, { $0.actor = "worker-2" },
            { $0.providerEndpoint = nil }, { $0.httpStatus = 400 }, { $0.providerError = "" }, { $0.providerErrorDescription = "x" },
            { $0.latencyMilliseconds = 13 }, { $0.detail = "" }, { $0.recordedBy = nil }, { $0.chainKey += "x" },
        ] {
            var row = Self.row
            change(&row)
            changed.append(row)
        }
        let hashes = Set(changed.map { $0.hash(after: previous) })
        #expect(hashes.count == changed.count)
        #expect(!hashes.contains(hash))
    }

    @Test func checkpointsVerifyOnlyWithTheirKeyAndUnchanged() throws {
        let key = AuditSigningKey()
        let other = AuditSigningKey()
        let checkpoint = try AuditCheckpoint(
            seq: 3,
            createdAtMicros: 1_795_334_400_000_000,
            txidFrom: 700,
            txidTo: 760,
            rowCount: 42,
            merkleRoot: Array(repeating: 1, count: 32),
            previousHash: Array(repeating: 2, count: 32)
        ).signed(with: key)
        #expect(checkpoint.keyID == key.publicKey.keyID)
        #expect(checkpoint.keyID.count == 16)
        #expect(checkpoint.isSigned(byOneOf: [key.publicKey]))
        #expect(!checkpoint.isSigned(byOneOf: [other.publicKey]))
        var forged = checkpoint
        forged.rowCount = 41
        #expect(!forged.isSigned(byOneOf: [key.publicKey]))
        forged = checkpoint
        forged.txidTo = 761
        #expect(!forged.isSigned(byOneOf: [key.publicKey]))
        #expect(forged.hash != checkpoint.hash)
    }

    @Test func keysReadBackFromPEM() throws {
        let key = AuditSigningKey()
        let again = try AuditSigningKey(pemRepresentation: key.pemRepresentation)
        #expect(again.publicKey == key.publicKey)
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let published = try AuditPublicKey(pemRepresentation: key.publicKey.pemRepresentation)
        #expect(published.keyID == key.publicKey.keyID)
        #expect(throws: AuditEvidenceError.self) {
            try AuditSigningKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----")
        }
        #expect(throws: AuditEvidenceError.self) { try AuditPublicKey(pemRepresentation: key.pemRepresentation) }
    }
}

@Suite("Receipts")
struct ReceiptTests {
    /// A request's chain of four rows among other rows, under one signed checkpoint, and its receipt.
    static func receipt(key: AuditSigningKey, events count: Int = 5) throws -> AuditReceipt {
        let request = UUID()
        let chain = request.uuidString.lowercased()
        let all: [(String, String?, Int?, String?)] = [
            ("enqueued", nil, nil, nil), ("claimed", nil, nil, nil), ("token_validated", "/auth/token", 200, nil),
            ("revoked", "/auth/revoke", 200, nil), ("succeeded", nil, nil, "outcome=revoked"),
        ]
        // Fewer events: the first ones and the final one.
        let kinds = Array(all.prefix(max(count - 1, 0))) + [all[all.count - 1]]
        var previous = AuditChainRow.genesis
        var events: [(AuditChainRow, [UInt8], [UInt8])] = []
        for (index, kind) in kinds.enumerated() {
            let row = AuditChainRow(
                chainKey: chain,
                chainSeq: Int64(index + 1),
                id: Int64(10 + 2 * index),
                occurredAtMicros: 1_795_334_400_000_000 + Int64(index) * 1000,
                txid: 900 + UInt64(index),
                requestID: request,
                clientID: "com.example.app",
                externalReference: "user <42> & \"co\"",
                userID: "000123.abc",
                event: kind.0,
                attempt: index == 0 ? 0 : 1,
                actor: index == 0 ? "api:billing" : "worker-1",
                providerEndpoint: kind.1,
                httpStatus: kind.2,
                providerError: nil,
                providerErrorDescription: nil,
                latencyMilliseconds: kind.1 == nil ? nil : 12,
                detail: kind.3,
                recordedBy: "revoker_app"
            )
            let hash = row.hash(after: previous)
            events.append((row, previous, hash))
            previous = hash
        }
        // Other requests' rows interleave (odd ids) in the checkpoint's slice.
        var leaves: [(Int64, [UInt8])] = events.map { ($0.0.id, $0.2) }
        for id in stride(from: Int64(9), through: 19, by: 2) { leaves.append((id, Array(repeating: UInt8(id), count: 32))) }
        leaves.sort { $0.0 < $1.0 }
        let checkpoint = try AuditCheckpoint(
            seq: 1,
            createdAtMicros: 1_795_334_460_000_000,
            txidFrom: 0,
            txidTo: 1000,
            rowCount: Int64(leaves.count),
            merkleRoot: MerkleTree.root(leaves.map(\.1)),
            previousHash: AuditCheckpoint.genesis
        ).signed(with: key)
        let proved = events.map { row, previous, hash in
            let index = leaves.firstIndex { $0.0 == row.id } ?? -1
            return AuditReceipt.Event(
                row: row,
                previousHash: previous.hex,
                hash: hash.hex,
                checkpoint: 1,
                leafIndex: index,
                path: MerkleTree.path(for: index, in: leaves.map(\.1)).map(\.hex)
            )
        }
        return try AuditReceipt.issue(events: proved, checkpoints: [checkpoint], issuedAtMicros: 1_795_334_500_000_000, key: key)
    }

    @Test func aReceiptVerifiesOfflineAndSaysWhatTheRowsSay() throws {
        let key = AuditSigningKey()
        let receipt = try Self.receipt(key: key)
        let bytes = try receipt.canonicalBytes()
        let result = AuditReceipt.verify(bytes, keys: [key.publicKey])
        #expect(result.valid, "\(result.problems)")
        #expect(receipt.summary.outcome == "revoked")
        #expect(receipt.summary.requestedBy == "api:billing")
        #expect(receipt.summary.appleCalls.map(\.endpoint) == ["/auth/token", "/auth/revoke"])
        #expect(receipt.summary.requestedAt == "2026-11-22T08:00:00.000000Z")
        #expect(!AuditReceipt.verify(bytes, keys: [AuditSigningKey().publicKey]).valid)
        let page = receipt.html()
        #expect(page.contains("user &lt;42&gt; &amp; &quot;co&quot;"))
        #expect(!page.contains("user <42>"))
    }

    @Test func changingAnyByteMakesItFail() throws {
        let key = AuditSigningKey()
        // Two events keep the file small: every position is tried, each a full verification.
        let bytes = try Self.receipt(key: key, events: 2).canonicalBytes()
        var accepted: [Int] = []
        for index in bytes.indices {
            var changed = bytes
            changed[index] ^= 0x01
            if AuditReceipt.verify(changed, keys: [key.publicKey]).valid { accepted.append(index) }
        }
        #expect(accepted.isEmpty, "changed bytes still verified at \(accepted.prefix(10))")
        #expect(!AuditReceipt.verify(bytes.dropLast(), keys: [key.publicKey]).valid)
        #expect(!AuditReceipt.verify(bytes + Data(" ".utf8), keys: [key.publicKey]).valid)
    }

    @Test func aReceiptWhoseSummaryOrEventsWereEditedAndResignedByAnotherKeyFails() throws {
        let key = AuditSigningKey()
        var receipt = try Self.receipt(key: key)
        receipt.summary.outcome = "already_invalid"
        let forger = AuditSigningKey()
        receipt.keyID = forger.publicKey.keyID
        // Even re-signed with the forger's key and checked against it, the summary and proofs fail.
        receipt.signature = ""
        receipt.signature = Data(try forger.sign(receipt.signedBytes())).base64EncodedString()
        let result = AuditReceipt.verify(try receipt.canonicalBytes(), keys: [forger.publicKey])
        #expect(result.problems.contains { $0.contains("summary") })
        #expect(result.problems.contains { $0.contains("checkpoint 1 is not signed") })
    }
}

@Suite("HTML escaping")
struct HTMLEscapingTests {
    @Test func everyQuoteIsEscapedEvenWhenAMarkJoinsIt() {
        // A quote and a combining acute accent are one Character; escaping by Character missed it.
        #expect(HTMLEscaping.escape("x\"\u{301} onfocus=1") == "x&quot;\u{301} onfocus=1")
        #expect(HTMLEscaping.escape("<\u{200D}b>'&`") == "&lt;\u{200D}b&gt;&#39;&amp;&#96;")
        #expect(HTMLEscaping.escape("plain ✓") == "plain ✓")
    }
}
