package streamsql.readonly;

import org.apache.hive.service.cli.HiveSQLException;

/**
 * A refusal inside HiveServer2: a HiveSQLException, which Spark's Thrift server passes on as
 * it is, and with no stack frames, so that the JDBC client's error (HiveServer2 sends the
 * exception printed with its trace) is the message alone.
 */
public class ThriftRefusal extends HiveSQLException {
  ThriftRefusal(String message) {
    super(message, "42000");  // syntax error or access rule violation
  }

  @Override
  public synchronized Throwable fillInStackTrace() {
    return this;
  }

  @Override
  public String toString() {
    return getMessage();
  }
}
