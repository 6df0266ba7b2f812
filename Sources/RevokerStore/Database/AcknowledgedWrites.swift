import Foundation
import Synchronization

/// A write this process acknowledged: answered with a 2xx, or a request it ended. With
/// asynchronous replication a failover can lose the newest commits; the writes kept here are
/// what the process checks for afterwards (``RevocationQueue/missing(_:)``).
public struct AcknowledgedWrite: Sendable, Hashable {
    /// What was written.
    public enum Kind: String, Sendable, CaseIterable {
        /// A revocation request was enqueued.
        case request
        /// A grant was registered for custody.
        case grant
        /// An account's deletion was accepted.
        case deletion
        /// A provider's message was stored (the provider does not send it again).
        case message
        /// A request was ended (succeeded, failed or cancelled).
        case end
    }

    public var kind: Kind
    /// The row's id; for a message, the provider's message id.
    public var id: String
    /// The app it belongs to (whose backend is told of a loss).
    public var clientID: String
    /// The provider, for a message (its ids are the provider's own).
    public var provider: String?
    /// The external or account reference, when there is one (the backend knows its own).
    public var reference: String?
    /// When the process saw the commit.
    public var at: Date

    public init(_ kind: Kind, id: String, clientID: String, provider: String? = nil, reference: String? = nil, at: Date = Date()) {
        self.kind = kind
        self.id = id
        self.clientID = clientID
        self.provider = provider
        self.reference = reference
        self.at = at
    }

    public init(_ kind: Kind, id: UUID, clientID: String, reference: String? = nil, at: Date = Date()) {
        self.init(kind, id: id.uuidString.lowercased(), clientID: clientID, reference: reference, at: at)
    }
}

/// The writes this process acknowledged lately, oldest first: at most ``capacity``, none older
/// than ``retention``. Shared by every copy of the queue in a process.
public final class AcknowledgedWrites: Sendable {
    /// A failover loses at most what replication had not sent yet: seconds of writes. Ten minutes
    /// outlasts any promotion the process could sit through without noticing.
    public static let retention: TimeInterval = 600
    public let capacity: Int

    private struct State {
        var writes: [AcknowledgedWrite] = []
        var start = 0
        /// Writes pushed out by ``capacity`` before they were ``retention`` old.
        var overflowed = 0
    }
    private let state = Mutex(State())

    public init(capacity: Int = 200_000) {
        self.capacity = capacity
    }

    public func record(_ write: AcknowledgedWrite) {
        state.withLock { state in
            state.writes.append(write)
            Self.trim(&state, now: write.at, capacity: capacity)
        }
    }

    /// The writes kept, oldest first, and how many younger than ``retention`` no longer fit.
    public func kept(now: Date = Date()) -> (writes: [AcknowledgedWrite], overflowed: Int) {
        state.withLock { state in
            Self.trim(&state, now: now, capacity: capacity)
            return (Array(state.writes[state.start...]), state.overflowed)
        }
    }

    /// Drops `writes` (found lost and recorded: a later failover does not report them again).
    public func forget(_ writes: [AcknowledgedWrite]) {
        let gone = Set(writes)
        state.withLock { state in
            state.writes = state.writes[state.start...].filter { !gone.contains($0) }
            state.start = 0
        }
    }

    private static func trim(_ state: inout State, now: Date, capacity: Int) {
        while state.start < state.writes.count, now.timeIntervalSince(state.writes[state.start].at) > retention {
            state.start += 1
        }
        let over = state.writes.count - state.start - capacity
        if over > 0 {
            state.start += over
            state.overflowed += over
        }
        // Compacted now and then, not on every call.
        if state.start > 1024, state.start * 2 > state.writes.count {
            state.writes.removeFirst(state.start)
            state.start = 0
        }
    }
}
