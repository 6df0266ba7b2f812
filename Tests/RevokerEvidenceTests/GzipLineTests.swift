import Foundation
import Testing

@testable import RevokerEvidence

#if canImport(Glibc)
import Glibc
#endif

/// Archive files are read line by line in constant memory: a line is bounded, so that a small
/// gzip file cannot make `verify-archive` or `receipt --archive` allocate without limit.
@Suite("Gzip lines: bounded")
struct GzipLineTests {
    static func file(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("revoker-lines-\(UUID().uuidString)-\(name).jsonl.gz").path
    }

    /// The process's peak resident size so far, in bytes.
    static func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss * 1024
    }

    /// A header, then one line of `megabytes` MB with no newline, written in parts: the file is
    /// a few hundred KB and writing it holds 1 MB at a time.
    static func bomb(megabytes: Int) throws -> String {
        let path = file("bomb")
        let writer = try GzipLineWriter(path: path)
        try writer.write(try AuditArchive.Line.header(before: "2026-01-01", months: ["2025-12"], createdAt: "2026-01-02T00:00:00Z").json())
        let part = String(repeating: "a", count: 1 << 20)
        for _ in 0..<megabytes { try writer.write(part: part) }
        _ = try writer.finish()
        return path
    }

    @Test func aGzipBombOfOneLineIsRefusedAtItsLineWithoutBeingHeld() throws {
        let path = try Self.bomb(megabytes: 300)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size < 1_000_000, "the bomb is small: \(size) bytes")
        let peak = Self.peakResidentBytes()
        let key = AuditSigningKey()
        let verifyError = #expect(throws: AuditEvidenceError.self) { try AuditArchive.verify(path: path, keys: [key.publicKey]) }
        #expect(verifyError?.description.contains("line 2 of \(path) is longer than 1048576 bytes") == true, "\(String(describing: verifyError))")
        let receiptError = #expect(throws: AuditEvidenceError.self) {
            try AuditArchive.receipt(path: path, requestID: UUID(), key: key, issuedAtMicros: 0)
        }
        #expect(receiptError?.description.contains("line 2 of \(path) is longer than") == true, "\(String(describing: receiptError))")
        // Read in constant memory: the 300 MB line was never held (nor copied).
        let grown = Self.peakResidentBytes() - peak
        #expect(grown < 64 << 20, "reading grew the peak resident size by \(grown >> 20) MB")
    }

    @Test func aLineOfTheBoundIsReadAndOneByteMoreIsRefused() throws {
        for (length, accepted) in [(GzipLineReader.maxLineBytes, true), (GzipLineReader.maxLineBytes + 1, false)] {
            let path = Self.file("bound")
            defer { try? FileManager.default.removeItem(atPath: path) }
            let writer = try GzipLineWriter(path: path)
            try writer.write("first")
            try writer.write(String(repeating: "é", count: length / 2) + String(repeating: "x", count: length % 2))
            try writer.write("last")
            _ = try writer.finish()
            var lines: [Int] = []
            do {
                try GzipLineReader.forEachLine(path) { lines.append($0.utf8.count) }
                #expect(accepted, "a line of \(length) bytes was read")
                #expect(lines == [5, length, 4])
            } catch let error as AuditEvidenceError {
                #expect(!accepted, "\(error)")
                #expect(error.description.contains("line 2 of"), "\(error)")
                #expect(lines == [5])
            }
        }
    }
}
