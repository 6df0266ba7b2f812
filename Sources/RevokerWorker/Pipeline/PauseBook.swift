/// Which apps this process has seen paused, so each pause period is logged loudly once,
/// not once per request that runs into it.
actor PauseBook {
    private var paused: Set<String> = []

    /// Records a pause; true when the app was not already known to be paused.
    func markPaused(_ clientID: String) -> Bool {
        paused.insert(clientID).inserted
    }

    func markResumed(_ clientID: String) {
        paused.remove(clientID)
    }
}
