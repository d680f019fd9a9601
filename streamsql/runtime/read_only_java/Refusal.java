package streamsql.readonly;

import org.apache.spark.QueryContext;
import org.apache.spark.sql.AnalysisException;
import org.apache.spark.sql.catalyst.trees.Origin;
import scala.Option;

/**
 * What `streamsql serve --read-only` refuses, as an AnalysisException whose message is the
 * whole story: "streamsql serves read-only: CREATE TABLE is refused (line 1, column 1)". It
 * has no error class and no stack frames, so a Spark Connect client shows the message alone.
 * Thrown while HiveServer2 runs a statement it is a HiveSQLException instead (ThriftRefusal),
 * which HiveServer2 hands the JDBC client as it is (any other exception goes with the
 * server's stack trace). Thrown as {@code throw Refusal.of(...)}.
 */
public class Refusal extends AnalysisException {
  public static final String PREFIX = "streamsql serves read-only: ";

  Refusal(String message) {
    super(message, Option.empty(), Option.empty(), Option.empty(), Option.empty(),
        scala.collection.immutable.Map$.MODULE$.<String, String>empty(), new QueryContext[0]);
  }

  /** The refusal of ``what``, at ``origin`` (else at the first word of ``sql``, when known). */
  public static RuntimeException of(String what, Origin origin, String sql) {
    String message = PREFIX + what + " is refused" + where(origin, sql);
    Throwable refusal = onThrift() ? new ThriftRefusal(message) : new Refusal(message);
    return Refusal.<RuntimeException>sneaky(refusal);
  }

  public static RuntimeException of(String what, Origin origin) {
    return of(what, origin, null);
  }

  /** True inside HiveServer2's statement execution. */
  private static boolean onThrift() {
    return StackWalker.getInstance().walk(frames -> frames.anyMatch(
        frame -> frame.getClassName().startsWith("org.apache.spark.sql.hive.thriftserver.")));
  }

  // A check rule is a Scala function; AnalysisException is a checked exception to Java only.
  @SuppressWarnings("unchecked")
  private static <T extends Throwable> RuntimeException sneaky(Throwable thrown) throws T {
    throw (T) thrown;
  }

  /** " (line 1, column 1)" where the parser recorded the statement's start, else "". */
  static String where(Origin origin, String sql) {
    if (origin != null && origin.line().isDefined()) {
      int column = origin.startPosition().isEmpty() ? 0 : (Integer) origin.startPosition().get();
      return " (line " + origin.line().get() + ", column " + (column + 1) + ")";
    }
    if (sql == null || sql.isBlank()) {
      return "";
    }
    int offset = 0;
    while (Character.isWhitespace(sql.charAt(offset))) {
      offset++;
    }
    int lineStart = sql.lastIndexOf('\n', offset - 1) + 1;
    long line = sql.substring(0, offset).chars().filter(c -> c == '\n').count() + 1;
    return " (line " + line + ", column " + (offset - lineStart + 1) + ")";
  }

  @Override
  public synchronized Throwable fillInStackTrace() {
    return this;  // where the check ran says nothing to the client
  }

  @Override
  public String toString() {
    return getMessage();
  }
}
