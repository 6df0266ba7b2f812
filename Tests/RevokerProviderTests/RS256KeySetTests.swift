import RevokerProvider
import Testing

@Suite("A provider's RS256 key set")
struct RS256KeySetTests {
    /// After failed fetches the pause doubles with each further failure, up to its cap (or the
    /// interval, when that is longer); a zero interval never pauses.
    @Test func thePauseAfterFailedFetchesDoublesUpToItsCap() {
        let pauses = (1...7).map { RS256KeySet.retryInterval(afterFailures: $0, minimumRefreshInterval: .seconds(60)) }
        #expect(pauses == [60, 120, 240, 480, 600, 600, 600].map { .seconds($0) })
        #expect(RS256KeySet.retryInterval(afterFailures: 3, minimumRefreshInterval: .seconds(900)) == .seconds(900))
        #expect(RS256KeySet.retryInterval(afterFailures: 3, minimumRefreshInterval: .zero) == .zero)
    }
}
