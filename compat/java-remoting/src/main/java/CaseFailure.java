/** A case's own verdict: its message is the reason printed after FAILED. */
public final class CaseFailure extends Exception {
    private static final long serialVersionUID = 1L;

    public CaseFailure(String message) {
        super(message);
    }
}
