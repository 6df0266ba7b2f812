import CompressNIO
import Crypto
import Foundation
import NIOCore

/// Writes lines to a new gzip file in constant memory, and the SHA-256 of the file's bytes.
public final class GzipLineWriter {
    private let handle: FileHandle
    private let compressor: ZlibCompressor
    private var pending = ByteBuffer()
    private var digest = SHA256()
    private static let chunk = 1 << 20

    /// Creates `path`; refuses one that exists.
    public init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]),
            let handle = FileHandle(forWritingAtPath: path)
        else { throw AuditEvidenceError("\(path) cannot be created") }
        self.handle = handle
        self.compressor = try ZlibCompressor(algorithm: .gzip)
    }

    public func write(_ line: some StringProtocol) throws {
        try write(part: line)
        pending.writeInteger(UInt8(ascii: "\n"))
    }

    /// Writes `part` without ending the line, so that a line of any length is written in
    /// constant memory (what a reader must survive).
    public func write(part: some StringProtocol) throws {
        pending.writeString(String(part))
        if pending.readableBytes >= Self.chunk { try deflate(.no) }
    }

    /// Compresses what is left, syncs the file to disk and closes it; returns its SHA-256.
    public func finish() throws -> [UInt8] {
        try deflate(.finish)
        try handle.synchronize()
        try handle.close()
        return Array(digest.finalize())
    }

    private func deflate(_ flush: CompressNIOFlush) throws {
        while true {
            var out = ByteBuffer()
            out.reserveCapacity(Self.chunk)
            // Finishing, an overflow means more output is to come; otherwise the input is what
            // is left to go.
            var finished = flush == .finish
            do {
                try compressor.deflate(from: &pending, to: &out, flush: flush)
            } catch let error as CompressNIOError where error == .bufferOverflow {
                finished = false
            }
            if out.readableBytes > 0 {
                let bytes = Data(out.readableBytesView)
                digest.update(data: bytes)
                try handle.write(contentsOf: bytes)
            }
            if flush == .finish ? finished : pending.readableBytes == 0 { break }
        }
        pending.clear()
    }
}

/// Reads the lines of a gzip file in constant memory.
public enum GzipLineReader {
    /// The longest line read, in bytes without its newline. An archive's longest lines (a row
    /// with every field at its limit, a checkpoint with many open transactions) are a few KB;
    /// a longer line is refused before it is held whole, so that a small file cannot make the
    /// reader allocate without bound (a gzip bomb of one line).
    public static let maxLineBytes = 1 << 20

    /// Calls `body` with each line of `path` (without its newline), in order. A damaged stream,
    /// or a line longer than `maxLineBytes`, throws; a truncated one simply ends, so a file's
    /// format must say where it ends.
    public static func forEachLine(_ path: String, maxLineBytes: Int = maxLineBytes, _ body: (Substring) throws -> Void) throws {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw AuditEvidenceError("\(path) cannot be read") }
        defer { try? handle.close() }
        let decompressor = try ZlibDecompressor(algorithm: .gzip)
        var partial: [UInt8] = []
        var number = 0
        func take(_ bytes: ByteBufferView.SubSequence) throws {
            guard partial.count + bytes.count <= maxLineBytes else {
                throw AuditEvidenceError("line \(number + 1) of \(path) is longer than \(maxLineBytes) bytes: not an archive line")
            }
            partial += bytes
        }
        func emit(_ bytes: ByteBufferView) throws {
            var start = bytes.startIndex
            while let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) {
                try take(bytes[start..<newline])
                number += 1
                try body(Substring(decoding: partial, as: UTF8.self))
                partial.removeAll(keepingCapacity: true)
                start = newline + 1
            }
            try take(bytes[start...])
        }
        while let data = try handle.read(upToCount: 1 << 20), !data.isEmpty {
            var input = ByteBuffer(bytes: data)
            while input.readableBytes > 0 {
                var out = ByteBuffer()
                out.reserveCapacity(1 << 20)
                var full = false
                do {
                    try decompressor.inflate(from: &input, to: &out)
                } catch let error as CompressNIOError where error == .bufferOverflow {
                    full = true
                } catch let error as CompressNIOError where error == .inputBufferOverflow {
                    full = false
                } catch {
                    throw AuditEvidenceError("\(path) is not a gzip file, or it is damaged")
                }
                try emit(out.readableBytesView)
                // Past the stream's end nothing is read: what follows it is not the file's.
                if !full && out.readableBytes == 0 { break }
            }
        }
        if !partial.isEmpty { try body(Substring(decoding: partial, as: UTF8.self)) }
    }
}
