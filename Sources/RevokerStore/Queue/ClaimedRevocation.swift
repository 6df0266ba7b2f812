import Foundation

/// A claimed request with its opened credential.
public struct ClaimedRevocation: Sendable, CustomStringConvertible {
    /// The request as claimed (state `running`).
    public var request: RevocationRequest
    /// The opened credential. Never log it (its description is redacted).
    public var credential: Credential
    /// The lease for fenced operations.
    public var lease: Lease
    /// What the provider's messages said of the request's user before the claim, if anything.
    public var userRevocation: UserRevocation?
    /// Whether an earlier attempt started exchanging the stored code (an `exchange_started`
    /// event) without storing what it yielded: the provider may already have used the code.
    public var exchangeStartedBefore: Bool

    public init(
        request: RevocationRequest,
        credential: Credential,
        lease: Lease,
        userRevocation: UserRevocation? = nil,
        exchangeStartedBefore: Bool = false
    ) {
        self.request = request
        self.credential = credential
        self.lease = lease
        self.userRevocation = userRevocation
        self.exchangeStartedBefore = exchangeStartedBefore
    }

    public var description: String {
        "ClaimedRevocation(id: \(self.request.id), kind: \(self.credential.kind), fencingToken: \(self.lease.fencingToken))"
    }
}
