import Foundation

/// A claimed request with its opened credential.
public struct ClaimedRevocation: Sendable, CustomStringConvertible {
    /// The request as claimed (state `running`).
    public var request: RevocationRequest
    /// The opened credential. Never log it (its description is redacted).
    public var credential: Credential
    /// The lease for fenced operations.
    public var lease: Lease

    public var description: String {
        "ClaimedRevocation(id: \(self.request.id), kind: \(self.credential.kind), fencingToken: \(self.lease.fencingToken))"
    }
}
