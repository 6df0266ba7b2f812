import Foundation
import Logging
import Synchronization

/// A `LogHandler` that keeps every message with its metadata, so tests can assert on logs
/// (for example that no secret was ever logged).
public struct CapturingLogHandler: LogHandler {
    /// Captured lines, shared by all copies of the handler.
    public final class Storage: Sendable {
        let lines = Mutex<[String]>([])
        public init() {}
        /// All captured lines: level, message, metadata, rendered as text.
        public var all: [String] { self.lines.withLock { $0 } }
        func append(_ line: String) { self.lines.withLock { $0.append(line) } }
    }

    public let storage: Storage
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    /// Creates a handler writing into `storage`.
    public init(storage: Storage) {
        self.storage = storage
    }

    /// A trace-level logger capturing into `storage`.
    public static func logger(label: String = "test", storage: Storage) -> Logger {
        var logger = Logger(label: label) { _ in CapturingLogHandler(storage: storage) }
        logger.logLevel = .trace
        return logger
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = self.metadata
        for (key, value) in event.metadata ?? [:] { merged[key] = value }
        self.storage.append("\(event.level) \(event.message) \(merged) \(event.source)")
    }
}
