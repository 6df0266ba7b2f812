import Instrumentation
import ServiceContextModule
import Tracing

/// A W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/#traceparent-header):
/// what carries a trace across the queue, stored with a request and sent on its webhooks.
///
/// Only a well-formed value exists: lowercase hex, a trace id and parent id that are not all
/// zeros, a version other than `ff`. A later version's value keeps its first four fields, as
/// the specification asks, and is held as version `00`. A malformed header is ignored by its
/// callers, never refused: the specification says to start a new trace instead.
public struct TraceParent: Sendable, Hashable, CustomStringConvertible {
    /// `00-<trace id>-<parent id>-<flags>`, 55 characters.
    public let rawValue: String

    /// The header name, as W3C Trace Context spells it.
    public static let headerName = "traceparent"

    public init?(_ value: some StringProtocol) {
        let bytes = Array(value.utf8)
        guard bytes.count >= 55, bytes[2] == UInt8(ascii: "-"), bytes[35] == UInt8(ascii: "-"), bytes[52] == UInt8(ascii: "-"),
            bytes[0..<2].allSatisfy(Self.isHex), bytes[3..<35].allSatisfy(Self.isHex), bytes[36..<52].allSatisfy(Self.isHex),
            bytes[53..<55].allSatisfy(Self.isHex)
        else { return nil }
        let version = String(decoding: bytes[0..<2], as: UTF8.self)
        // Version 00 is exactly 55 characters; a later one may add fields after a dash.
        guard version != "ff", version == "00" ? bytes.count == 55 : (bytes.count == 55 || bytes[55] == UInt8(ascii: "-")) else { return nil }
        guard bytes[3..<35].contains(where: { $0 != UInt8(ascii: "0") }), bytes[36..<52].contains(where: { $0 != UInt8(ascii: "0") })
        else { return nil }
        rawValue = "00" + String(decoding: bytes[2..<55], as: UTF8.self)
    }

    /// The trace id, 32 hex digits.
    public var traceID: Substring { rawValue.dropFirst(3).prefix(32) }

    /// The parent span's id, 16 hex digits.
    public var parentID: Substring { rawValue.dropFirst(36).prefix(16) }

    public var description: String { rawValue }

    /// Whether the caller sampled its span: the `sampled` bit of the flags.
    public var isSampled: Bool {
        guard let flags = UInt8(rawValue.suffix(2), radix: 16) else { return false }
        return flags & 1 == 1
    }

    /// The same span with its `sampled` bit set to `sampled`, its other flags kept.
    public func sampled(_ sampled: Bool) -> TraceParent {
        let flags = UInt8(rawValue.suffix(2), radix: 16) ?? 0
        let changed = sampled ? flags | 1 : flags & ~1
        let hex = String(changed, radix: 16)
        return TraceParent(rawValue.dropLast(2) + (hex.count == 1 ? "0" + hex : hex)) ?? self
    }

    /// Whether a trace of this id is sampled at `ratio`: its last 16 hex digits, read as a
    /// number, fall below `ratio` of their range, so that every process decides alike.
    public func isSampled(atRatio ratio: Double) -> Bool {
        guard ratio < 1 else { return true }
        guard ratio > 0, let value = UInt64(traceID.suffix(16), radix: 16) else { return false }
        return Double(value) < ratio * 18_446_744_073_709_551_616.0
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}

extension TraceParent {
    /// A context whose remote parent is this span, for `withSpan(_:context:)`: a span started
    /// in it continues the trace, however long ago the parent ended. Without a tracer it is
    /// the top-level context.
    public var context: ServiceContext {
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract([Self.headerName: rawValue], into: &context, using: DictionaryExtractor())
        return context
    }

    /// The `traceparent` of the span `context` holds, when a tracer is bootstrapped and a span
    /// is active; nil otherwise.
    public static func of(_ context: ServiceContext?) -> TraceParent? {
        guard let context else { return nil }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: DictionaryInjector())
        return carrier[headerName].flatMap { TraceParent($0) }
    }

    /// What to store with a request that `incoming` (a caller's header, when well-formed) asked
    /// for: the current span when a tracer runs, so the worker's attempt becomes its child;
    /// otherwise the caller's own, so that its webhooks still join the caller's trace.
    public static func forQueue(incoming: TraceParent?) -> TraceParent? {
        of(ServiceContext.current) ?? incoming
    }
}

/// Reads a carrier of header names and values.
public struct DictionaryExtractor: Extractor {
    public init() {}

    public func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key]
    }
}

/// Writes into a carrier of header names and values.
public struct DictionaryInjector: Injector {
    public init() {}

    public func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }
}
