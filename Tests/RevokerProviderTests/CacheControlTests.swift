import RevokerProvider
import Testing

@Suite("Cache-Control")
struct CacheControlTests {
    @Test func maxAgeIsReadAmongOtherDirectives() {
        #expect(CacheControl.maxAge("public, max-age=19008, must-revalidate, no-transform") == .seconds(19008))
        #expect(CacheControl.maxAge("MAX-AGE = 60") == .seconds(60))
        #expect(CacheControl.maxAge("max-age=0") == .zero)
    }

    @Test func anAbsentOrUnreadableMaxAgeIsNone() {
        #expect(CacheControl.maxAge("no-cache") == nil)
        #expect(CacheControl.maxAge("max-age=-1") == nil)
        #expect(CacheControl.maxAge("max-age=soon") == nil)
        #expect(CacheControl.maxAge("") == nil)
    }
}
