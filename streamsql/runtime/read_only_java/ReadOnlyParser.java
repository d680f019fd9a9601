package streamsql.readonly;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.TableIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.parser.ParameterContext;
import org.apache.spark.sql.catalyst.parser.ParseException;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.parser.SqlStatementSplitResult;
import org.apache.spark.sql.catalyst.parser.TemporalIdentifier;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Spark's SQL parser, with each statement it parses checked by ReadOnly before anything of
 * it is resolved: a refused statement is refused at its line and column, and reads nothing
 * (CREATE TABLE ... LOCATION, `csv`.`/path`). The rest is the parser's own.
 */
public class ReadOnlyParser implements ParserInterface {
  private final SparkSession session;
  private final ParserInterface parser;

  ReadOnlyParser(SparkSession session, ParserInterface parser) {
    this.session = session;
    this.parser = parser;
  }

  private LogicalPlan checked(LogicalPlan plan, String sql) {
    if (!ReadOnly.admin(session)) {
      new ReadOnly.Check(true, sql).visit(plan);
    }
    return plan;
  }

  @Override
  public LogicalPlan parsePlan(String sql) throws ParseException {
    return checked(parser.parsePlan(sql), sql);
  }

  @Override
  public LogicalPlan parsePlanWithParameters(String sql, ParameterContext parameters) throws ParseException {
    return checked(parser.parsePlanWithParameters(sql, parameters), sql);
  }

  @Override
  public LogicalPlan parseQuery(String sql) throws ParseException {
    return checked(parser.parseQuery(sql), sql);
  }

  @Override
  public Expression parseExpression(String sql) throws ParseException {
    return parser.parseExpression(sql);
  }

  @Override
  public TableIdentifier parseTableIdentifier(String sql) throws ParseException {
    return parser.parseTableIdentifier(sql);
  }

  @Override
  public FunctionIdentifier parseFunctionIdentifier(String sql) throws ParseException {
    return parser.parseFunctionIdentifier(sql);
  }

  @Override
  public scala.collection.immutable.Seq<String> parseMultipartIdentifier(String sql) throws ParseException {
    return parser.parseMultipartIdentifier(sql);
  }

  @Override
  public TemporalIdentifier parseTemporalTableIdentifier(String sql) throws ParseException {
    return parser.parseTemporalTableIdentifier(sql);
  }

  @Override
  public StructType parseRoutineParam(String sql) throws ParseException {
    return parser.parseRoutineParam(sql);
  }

  @Override
  public SqlStatementSplitResult splitStatements(String sql) {
    return parser.splitStatements(sql);
  }

  @Override
  public StructType parseTableSchema(String sql) throws ParseException {
    return parser.parseTableSchema(sql);
  }

  @Override
  public DataType parseDataType(String sql) throws ParseException {
    return parser.parseDataType(sql);
  }
}
