/// What a database owner who means to rewrite the audit trail runs (with triggers disabled):
/// the security reviews' attacks, for the tests that must detect them.
public enum AuditTampering {
    /// A `DO` block that recomputes the hashes of `chain` in order, each row after the one
    /// before, and its recorded head, with the database's own function.
    public static func rehashChain(_ chain: String) -> String {
        """
        DO $$
        DECLARE r revoker.audit_events; prev bytea := '\\x0000000000000000000000000000000000000000000000000000000000000000';
        BEGIN
            FOR r IN SELECT * FROM revoker.audit_events WHERE chain_key = '\(chain)' ORDER BY chain_seq LOOP
                r.prev_hash := prev;
                r.hash := revoker.audit_row_hash(prev, r);
                UPDATE revoker.audit_events SET prev_hash = r.prev_hash, hash = r.hash WHERE id = r.id;
                prev := r.hash;
            END LOOP;
            UPDATE revoker.audit_chains SET last_hash = prev WHERE chain_key = '\(chain)';
        END $$
        """
    }
}
