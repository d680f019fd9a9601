package streamsql.readonly;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.analysis.UnresolvedFunction;
import org.apache.spark.sql.catalyst.analysis.UnresolvedRelation;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.expressions.CallMethodViaReflection;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.expressions.UserDefinedExpression;
import org.apache.spark.sql.catalyst.parser.ParserInterface;
import org.apache.spark.sql.catalyst.plans.logical.Command;
import org.apache.spark.sql.catalyst.plans.logical.InsertIntoStatement;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.command.SetCommand;
import org.apache.spark.sql.execution.datasources.DataSource$;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.internal.SQLConf;
import scala.Function1;
import scala.Option;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.runtime.AbstractFunction1;
import scala.runtime.AbstractFunction2;
import scala.runtime.BoxedUnit;

/**
 * `streamsql serve --read-only` for Spark's own SQL and plans (HiveServer2, Spark Connect), a
 * session extension (spark.sql.extensions). Refused: every Command but SHOW, DESCRIBE,
 * EXPLAIN, USE, SET and RESET (DDL, INSERT, ADD JAR, CREATE FUNCTION, CACHE, ...), relations
 * that are not catalog tables (a path, a data source, a stream), user-defined functions
 * (Python, Scala, Hive), reflect()/java_method(), TRANSFORM's scripts, and SET of the
 * settings that would undo this (ReadOnly.guarded). Checked three times: each SQL statement
 * as it is parsed (ReadOnlyParser: before anything is resolved, with the statement's line
 * and column), each plan once it is resolved (a post-hoc resolution rule: DataFrame plans
 * too) and by a check rule as the last word. `format`.`path` tables (SQL on files, off:
 * spark.sql.runSQLOnFiles=false) are named by a resolution rule before Spark would call
 * them missing. The session holding the admin key (serve's own, which registers the
 * catalog's tables) is exempt: its key is in a file no client can read (see key()).
 */
public class ReadOnly extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  public static final String ADMIN_CONF = "spark.streamsql.readOnly.admin";
  public static final String KEY_FILE_ENV = "STREAMSQL_READ_ONLY_KEY_FILE";

  /** Commands that only read: besides every Show* and Describe* one. */
  private static final Set<String> READING_COMMANDS = Set.of("ExplainCommand", "SetCommand", "ResetCommand",
      "SetNamespaceCommand", "SetCatalogAndNamespace", "SetCatalogCommand", "SetNamespace", "CommandResult");
  /** Leaf plans that read nothing but the query's own values, or what an allowed plan read. */
  private static final Set<String> OWN_LEAVES = Set.of("LocalRelation", "OneRowRelation", "Range", "CTERelationRef",
      "InMemoryRelation", "CommandResult", "EmptyRelation");
  /** The statement each refused plan is, where its class name does not say it plainly. */
  private static final Map<String, String> KINDS = new HashMap<>();

  static {
    for (String name : new String[] {"CreateDataSourceTableCommand", "CreateTableCommand", "CreateTable",
        "CreateTableAsSelect", "CreateDataSourceTableAsSelectCommand", "CreateHiveTableAsSelectCommand",
        "CreateTableLikeCommand"}) {
      KINDS.put(name, "CREATE TABLE");
    }
    KINDS.put("ReplaceTable", "REPLACE TABLE");
    KINDS.put("ReplaceTableAsSelect", "REPLACE TABLE");
    KINDS.put("CreateViewCommand", "CREATE VIEW");
    KINDS.put("CreateView", "CREATE VIEW");
    KINDS.put("CreateFunctionCommand", "CREATE FUNCTION");
    KINDS.put("CreateFunction", "CREATE FUNCTION");
    KINDS.put("CreateUserDefinedFunctionCommand", "CREATE FUNCTION");
    KINDS.put("CreateSQLFunctionCommand", "CREATE FUNCTION");
    KINDS.put("CreateUserDefinedFunction", "CREATE FUNCTION");
    KINDS.put("CreateNamespace", "CREATE DATABASE");
    KINDS.put("CreateDatabaseCommand", "CREATE DATABASE");
    KINDS.put("DropNamespace", "DROP DATABASE");
    KINDS.put("DropTableCommand", "DROP TABLE");
    KINDS.put("DropFunctionCommand", "DROP FUNCTION");
    KINDS.put("AddJarsCommand", "ADD JAR");
    KINDS.put("AddFilesCommand", "ADD FILE");
    KINDS.put("AddArchivesCommand", "ADD ARCHIVE");
    for (String name : new String[] {"InsertIntoStatement", "InsertIntoHadoopFsRelationCommand",
        "InsertIntoDataSourceCommand", "AppendData", "OverwriteByExpression", "OverwritePartitionsDynamic",
        "InsertIntoHiveTable"}) {
      KINDS.put(name, "INSERT");
    }
    KINDS.put("InsertIntoDataSourceDirCommand", "INSERT OVERWRITE DIRECTORY");
    KINDS.put("InsertIntoHiveDirCommand", "INSERT OVERWRITE DIRECTORY");
    KINDS.put("InsertIntoDir", "INSERT OVERWRITE DIRECTORY");
    KINDS.put("SaveIntoDataSourceCommand", "a DataFrame write");
    KINDS.put("CacheTableCommand", "CACHE TABLE");
    KINDS.put("CacheTableAsSelect", "CACHE TABLE");
    KINDS.put("CreateVariable", "DECLARE VARIABLE");
    KINDS.put("ScriptTransformation", "TRANSFORM (a script)");
    KINDS.put("CompoundBody", "a SQL script (BEGIN ... END)");
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectParser(new AbstractFunction2<SparkSession, ParserInterface, ParserInterface>() {
      @Override
      public ParserInterface apply(SparkSession session, ParserInterface parser) {
        return new ReadOnlyParser(session, parser);
      }
    });
    extensions.injectResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
      @Override
      public Rule<LogicalPlan> apply(SparkSession session) {
        return new FileTables(session);
      }
    });
    extensions.injectPostHocResolutionRule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
      @Override
      public Rule<LogicalPlan> apply(SparkSession session) {
        return new Rule<LogicalPlan>() {
          @Override
          public LogicalPlan apply(LogicalPlan plan) {
            if (plan.resolved() && !admin(session)) {  // (an unresolved one fails its own way)
              new Check(false, null).visit(plan);
            }
            return plan;
          }
        };
      }
    });
    extensions.injectCheckRule(new AbstractFunction1<SparkSession, Function1<LogicalPlan, BoxedUnit>>() {
      @Override
      public Function1<LogicalPlan, BoxedUnit> apply(SparkSession session) {
        return new AbstractFunction1<LogicalPlan, BoxedUnit>() {
          @Override
          public BoxedUnit apply(LogicalPlan plan) {
            if (!admin(session)) {
              new Check(false, null).visit(plan);
            }
            return BoxedUnit.UNIT;
          }
        };
      }
    });
    return BoxedUnit.UNIT;
  }

  /** True for the session that set ADMIN_CONF to the server's key. */
  static boolean admin(SparkSession session) {
    String key = key();
    if (key.isEmpty()) {
      return false;
    }
    String given = session.conf().get(ADMIN_CONF, "");
    return MessageDigest.isEqual(key.getBytes(StandardCharsets.UTF_8), given.getBytes(StandardCharsets.UTF_8));
  }

  private static volatile String key;

  /**
   * The key, read once from the owner-only file $STREAMSQL_READ_ONLY_KEY_FILE names (not
   * the environment: SQL's ${env:...} substitution, turned off here, would show it).
   */
  private static String key() {
    if (key == null) {
      String file = System.getenv(KEY_FILE_ENV);
      try {
        key = file == null || file.isEmpty() ? "" : Files.readString(Paths.get(file), StandardCharsets.UTF_8).trim();
      } catch (IOException unreadable) {
        key = "";  // no session is exempt
      }
    }
    return key;
  }

  /** "CREATE TABLE" for CreateDataSourceTableCommand, "ALTER TABLE ADD COLUMNS" for AlterTableAddColumnsCommand. */
  static String kind(String className) {
    String known = KINDS.get(className);
    if (known != null) {
      return known;
    }
    String base = className.replaceAll("(Command|Exec|Statement)$", "");
    return base.replaceAll("([a-z0-9])([A-Z])", "$1 $2").toUpperCase(Locale.ROOT);
  }

  /** The first words of a statement ``sql`` that say what it is (ALTER TABLE, INSERT INTO); null for none. */
  static String statementKind(String sql) {
    if (sql == null) {
      return null;
    }
    String text = LEADING.matcher(sql).replaceFirst("");
    String[] words = text.split("[^A-Za-z_]+", 12);
    if (words.length == 0 || !STATEMENT_WORDS.contains(words[0].toUpperCase(Locale.ROOT))) {
      return null;
    }
    StringBuilder kind = new StringBuilder(words[0].toUpperCase(Locale.ROOT));
    for (int i = 1; i < words.length && KIND_WORDS.contains(words[i].toUpperCase(Locale.ROOT)); i++) {
      String word = words[i].toUpperCase(Locale.ROOT);
      if (!Set.of("IF", "NOT", "EXISTS").contains(word)) {
        kind.append(' ').append(word);
      }
    }
    return kind.toString();
  }

  private static final Pattern LEADING = Pattern.compile("^(?:\\s+|--[^\\n]*(?:\\n|$)|/\\*.*?\\*/)*", Pattern.DOTALL);
  private static final Set<String> STATEMENT_WORDS = Set.of("CREATE", "DROP", "ALTER", "INSERT", "ADD", "LOAD", "CACHE",
      "UNCACHE", "REFRESH", "MSCK", "ANALYZE", "TRUNCATE", "DECLARE", "REPLACE", "MERGE", "UPDATE", "DELETE", "CLEAR",
      "CALL", "REPAIR", "COMMENT", "SET", "LIST");
  private static final Set<String> KIND_WORDS = Set.of("OR", "REPLACE", "TEMPORARY", "TEMP", "GLOBAL", "EXTERNAL",
      "TABLE", "VIEW", "FUNCTION", "DATABASE", "SCHEMA", "NAMESPACE", "CATALOG", "INTO", "OVERWRITE", "DIRECTORY",
      "LOCAL", "JAR", "JARS", "FILE", "FILES", "ARCHIVE", "ARCHIVES", "DATA", "LAZY", "REPAIR", "VARIABLE", "CACHE",
      "IF", "NOT", "EXISTS");

  /** A setting whose change would open what read-only closes. */
  static boolean guarded(String key) {
    String lower = key.toLowerCase(Locale.ROOT);
    return lower.equals("spark.sql.runsqlonfiles") || lower.equals("spark.sql.variable.substitute")
        || lower.startsWith("spark.sql.catalog.") || lower.startsWith("spark.streamsql.");
  }

  /**
   * Refuses a plan that reads or does more than catalog tables' rows. ``parsed``: a plan just
   * parsed from ``sql`` (its relations and functions are names yet).
   */
  static final class Check {
    private static final Set<String> REFLECTION = Set.of("reflect", "java_method", "try_reflect");
    private final boolean parsed;
    private final String sql;
    private LogicalPlan root;

    Check(boolean parsed, String sql) {
      this.parsed = parsed;
      this.sql = sql;
    }

    /** The kind of statement ``node`` is: its SQL's words when it is the parsed statement itself. */
    private String kindOf(LogicalPlan node, String name) {
      String words = node == root ? statementKind(sql) : null;
      return words != null && !words.equals("SET") ? words : kind(name);
    }

    void visit(LogicalPlan node) {
      if (root == null) {
        root = node;
      }
      String name = node.getClass().getSimpleName();
      if (node instanceof Command) {
        if (node instanceof SetCommand) {
          Option<Tuple2<String, Option<String>>> pair = ((SetCommand) node).kv();
          if (pair.isDefined() && pair.get()._2().isDefined() && guarded(pair.get()._1())) {
            throw Refusal.of("SET " + pair.get()._1(), node.origin(), sql);
          }
        }
        if (name.startsWith("Show") || name.startsWith("Describe") || READING_COMMANDS.contains(name)) {
          return;  // its children are what it names (a table, a namespace), not rows it reads
        }
        throw Refusal.of(kindOf(node, name), node.origin(), sql);
      }
      if (node instanceof InsertIntoStatement || KINDS.containsKey(name) || name.contains("Python")
          || name.contains("Pandas") || name.contains("InArrow") || name.endsWith("InR") || name.contains("InRWith")) {
        throw Refusal.of(KINDS.containsKey(name) ? kindOf(node, name) : "a Python (or R) function's plan (" + name + ")",
            node.origin(), sql);
      }
      if (node.children().isEmpty()) {
        leaf(node, name);
      }
      for (Iterator<Expression> each = node.expressions().iterator(); each.hasNext(); ) {
        expression(each.next());
      }
      for (Iterator<LogicalPlan> each = node.children().iterator(); each.hasNext(); ) {
        visit(each.next());
      }
    }

    private void leaf(LogicalPlan node, String name) {
      if (node instanceof UnresolvedRelation) {
        String path = FileTables.path((UnresolvedRelation) node);
        if (path != null) {
          throw Refusal.of(path, node.origin(), sql);
        }
        return;
      }
      if (parsed && name.startsWith("Unresolved")) {
        return;  // (a table-valued function, an inline table: resolved and checked later)
      }
      if (node instanceof LogicalRelation) {
        LogicalRelation relation = (LogicalRelation) node;
        if (relation.catalogTable().isDefined()) {
          return;
        }
        String what = relation.relation() instanceof HadoopFsRelation
            ? "reading the path " + ((HadoopFsRelation) relation.relation()).location().rootPaths().mkString(", ")
            : "reading the data source " + relation.relation().getClass().getSimpleName();
        throw Refusal.of(what, node.origin(), sql);
      }
      if (node instanceof HiveTableRelation || OWN_LEAVES.contains(name)) {
        return;
      }
      if (node.isStreaming()) {
        throw Refusal.of("a streaming read (" + name + ")", node.origin(), sql);
      }
      if (node instanceof DataSourceV2Relation) {
        throw Refusal.of("reading the data source " + ((DataSourceV2Relation) node).name(), node.origin(), sql);
      }
      throw Refusal.of("reading " + name, node.origin(), sql);
    }

    private void expression(Expression expression) {
      if (expression instanceof CallMethodViaReflection) {
        throw Refusal.of(expression.prettyName() + "()", expression.origin(), sql);
      }
      if (expression instanceof UnresolvedFunction) {
        String function = ((UnresolvedFunction) expression).nameParts().last().toLowerCase(Locale.ROOT);
        if (REFLECTION.contains(function)) {
          throw Refusal.of(function + "()", expression.origin(), sql);
        }
      }
      if (expression instanceof UserDefinedExpression) {
        String cls = expression.getClass().getSimpleName();
        String language = cls.startsWith("Python") ? "Python " : cls.startsWith("Scala") ? "Scala " : "";
        throw Refusal.of("the " + language + "user-defined function " + ((UserDefinedExpression) expression).name(),
            expression.origin(), sql);
      }
      if (expression instanceof SubqueryExpression) {
        visit(((SubqueryExpression) expression).plan());
      }
      for (Iterator<Expression> each = expression.children().iterator(); each.hasNext(); ) {
        expression(each.next());
      }
    }
  }

  /** `parquet`.`/path` left unresolved (runSQLOnFiles off): refused by name, not "not found". */
  static final class FileTables extends Rule<LogicalPlan> {
    private final SparkSession session;

    FileTables(SparkSession session) {
      this.session = session;
    }

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      if (!admin(session)) {
        find(plan);
      }
      return plan;
    }

    /** "reading the path `/etc` as parquet" for such a relation, else null. */
    static String path(UnresolvedRelation relation) {
      scala.collection.immutable.Seq<String> parts = relation.multipartIdentifier();
      return parts.size() == 2 && isFormat(parts.head())
          ? "reading the path `" + parts.last() + "` as " + parts.head() : null;
    }

    private void find(LogicalPlan node) {
      if (node instanceof UnresolvedRelation && path((UnresolvedRelation) node) != null) {
        throw Refusal.of(path((UnresolvedRelation) node), node.origin());
      }
      for (Iterator<Expression> each = node.expressions().iterator(); each.hasNext(); ) {
        subqueries(each.next());
      }
      for (Iterator<LogicalPlan> each = node.children().iterator(); each.hasNext(); ) {
        find(each.next());
      }
    }

    private void subqueries(Expression expression) {
      if (expression instanceof SubqueryExpression) {
        find(((SubqueryExpression) expression).plan());
      }
      for (Iterator<Expression> each = expression.children().iterator(); each.hasNext(); ) {
        subqueries(each.next());
      }
    }

    private static boolean isFormat(String name) {
      try {
        DataSource$.MODULE$.lookupDataSource(name, SQLConf.get());
        return true;
      } catch (Throwable notOne) {  // ClassNotFoundException wrapped in Spark's own
        return false;
      }
    }
  }
}
