import RevokerStore

/// Lets one verification of the audit trail run at a time: each reads every row, so unbounded
/// concurrent calls could hold the database. A caller asking what is being answered already
/// shares that answer; another question is turned away until it is done.
actor AuditVerificationGate {
    private var running: (question: String, answer: Task<AuditVerification, any Error>)?

    /// The answer to `question` (its scope, as text), or nil when another one is under way.
    func verify(_ question: String, _ body: @escaping @Sendable () async throws -> AuditVerification) async throws -> AuditVerification? {
        if let running {
            guard running.question == question else { return nil }
            return try await running.answer.value
        }
        // Not a child task: a caller that goes away must not cancel the answer others wait for.
        let answer = Task { try await body() }
        running = (question, answer)
        defer { running = nil }
        return try await answer.value
    }
}
