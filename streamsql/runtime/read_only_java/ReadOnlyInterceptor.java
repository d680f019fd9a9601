package streamsql.readonly;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.sparkproject.connect.google_protos.rpc.ErrorInfo;
import org.sparkproject.connect.google_protos.rpc.Status;
import org.sparkproject.connect.grpc.ForwardingServerCallListener;
import org.sparkproject.connect.grpc.Metadata;
import org.sparkproject.connect.grpc.ServerCall;
import org.sparkproject.connect.grpc.ServerCallHandler;
import org.sparkproject.connect.grpc.ServerInterceptor;
import org.sparkproject.connect.grpc.StatusRuntimeException;
import org.sparkproject.connect.grpc.protobuf.StatusProto;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.Descriptors.FieldDescriptor;
import org.sparkproject.connect.protobuf.Message;

/**
 * `streamsql serve --read-only` for Spark Connect requests, before Spark plans them
 * (spark.connect.grpc.interceptor.classes): what the server would run, load or read while
 * planning, ahead of ReadOnly's check rule — artifacts (jars, classes, files), Python, Scala
 * and Java functions (their code is unpickled or deserialized as it is planned), reads of
 * paths and formats (spark.read: files would be listed and their schema read), writes,
 * streaming queries, Spark ML, pipelines, checkpoints, external commands, the catalog API's
 * changes, compressed plans (this server sets the clients' compression threshold to -1, so
 * only a client that ignores it sends one) and settings that would undo read-only.
 * Refusals reach the client as an AnalysisException with the message alone.
 */
public class ReadOnlyInterceptor implements ServerInterceptor {
  private static final Map<String, String> REFUSED = new HashMap<>();

  static {
    String[][] refused = {
      {"spark.connect.Read.DataSource", "spark.read of a path or a data source (read catalog tables: spark.table)"},
      {"spark.connect.WriteOperation", "a DataFrame write"},
      {"spark.connect.WriteOperationV2", "a DataFrame write"},
      {"spark.connect.WriteStreamOperationStart", "a streaming query"},
      {"spark.connect.StreamingForeachFunction", "a streaming foreach function"},
      {"spark.connect.StreamingQueryManagerCommand.StreamingQueryListenerCommand", "a streaming query listener"},
      {"spark.connect.PythonUDF", "a Python function"},
      {"spark.connect.PythonUDTF", "a Python table function"},
      {"spark.connect.PythonDataSource", "a Python data source"},
      {"spark.connect.CommonInlineUserDefinedDataSource", "a Python data source"},
      {"spark.connect.ScalarScalaUDF", "a Scala function"},
      {"spark.connect.JavaUDF", "a Java function"},
      {"spark.connect.CreateDataFrameViewCommand", "creating a view"},
      {"spark.connect.MergeIntoTableCommand", "MERGE INTO"},
      {"spark.connect.MlCommand", "Spark ML"},
      {"spark.connect.PipelineCommand", "a pipeline"},
      {"spark.connect.CheckpointCommand", "a checkpoint"},
      {"spark.connect.ExecuteExternalCommand", "an external command"},
      {"spark.connect.CreateResourceProfileCommand", "a resource profile"},
      {"spark.connect.CreateTable", "spark.catalog.createTable"},
      {"spark.connect.CreateExternalTable", "spark.catalog.createExternalTable"},
      {"spark.connect.CreateDatabase", "spark.catalog.createDatabase"},
      {"spark.connect.Drop", "a catalog drop"},
      {"spark.connect.DropDatabase", "spark.catalog.dropDatabase"},
      {"spark.connect.DropTable", "spark.catalog.dropTable"},
      {"spark.connect.DropView", "spark.catalog.dropView"},
      {"spark.connect.DropGlobalTempView", "spark.catalog.dropGlobalTempView"},
      {"spark.connect.RecoverPartitions", "spark.catalog.recoverPartitions"},
      {"spark.connect.CacheTable", "spark.catalog.cacheTable"},
      {"spark.connect.ClearCache", "spark.catalog.clearCache"},
      {"spark.connect.RefreshTable", "spark.catalog.refreshTable"},
      {"spark.connect.RefreshByPath", "spark.catalog.refreshByPath"},
      {"spark.connect.Plan.CompressedOperation", "a compressed plan"},
    };
    for (String[] each : refused) {
      REFUSED.put(each[0], each[1]);
    }
  }

  @Override
  public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                    ServerCallHandler<Q, R> next) {
    if ("AddArtifacts".equals(call.getMethodDescriptor().getBareMethodName())) {
      refuse(call, "adding artifacts (jars, classes, files, large local data)");
      return new ServerCall.Listener<Q>() {};
    }
    return new ForwardingServerCallListener.SimpleForwardingServerCallListener<Q>(next.startCall(call, headers)) {
      private boolean refused;

      @Override
      public void onMessage(Q message) {
        String what = message instanceof Message ? refusal((Message) message) : null;
        if (what != null) {
          refused = true;
          refuse(call, what);
        } else if (!refused) {
          super.onMessage(message);
        }
      }

      @Override
      public void onHalfClose() {
        if (!refused) {
          super.onHalfClose();
        }
      }

      @Override
      public void onReady() {
        if (!refused) {
          super.onReady();
        }
      }
    };
  }

  /** What of ``message`` (or of a message inside it) read-only refuses; null for nothing. */
  static String refusal(Message message) {
    String type = message.getDescriptorForType().getFullName();
    String what = REFUSED.get(type);
    if (what != null) {
      return what;
    }
    if (type.equals("spark.connect.KeyValue") || type.equals("spark.connect.ConfigRequest.Set")) {
      // (KeyValue: the pairs of a ConfigRequest's set; reading a setting is fine)
      return null;
    }
    for (Map.Entry<FieldDescriptor, Object> field : message.getAllFields().entrySet()) {
      if (field.getKey().getJavaType() != FieldDescriptor.JavaType.MESSAGE) {
        continue;
      }
      List<?> values = field.getKey().isRepeated() ? (List<?>) field.getValue() : List.of(field.getValue());
      for (Object value : values) {
        String inner = refusal((Message) value);
        if (inner != null) {
          return inner;
        }
      }
    }
    if (type.equals("spark.connect.ConfigRequest.Operation")) {
      return setting(message);
    }
    return null;
  }

  /** A ConfigRequest setting a guarded key (ReadOnly.guarded); the admin key is the check rule's. */
  private static String setting(Message operation) {
    FieldDescriptor set = operation.getDescriptorForType().findFieldByName("set");
    if (set == null || !operation.hasField(set)) {
      return null;
    }
    Message pairs = (Message) operation.getField(set);
    for (Object pair : (List<?>) pairs.getField(pairs.getDescriptorForType().findFieldByName("pairs"))) {
      Message keyValue = (Message) pair;
      String key = (String) keyValue.getField(keyValue.getDescriptorForType().findFieldByName("key"));
      if (ReadOnly.guarded(key) && !key.equals(ReadOnly.ADMIN_CONF)) {
        return "setting " + key;
      }
    }
    return null;
  }

  private static <Q, R> void refuse(ServerCall<Q, R> call, String what) {
    String message = Refusal.PREFIX + what + " is refused";
    String analysis = "org.apache.spark.sql.AnalysisException";  // what Spark Connect's clients raise
    ErrorInfo info = ErrorInfo.newBuilder().setReason(analysis).setDomain("org.apache.spark")
        .putMetadata("classes", "[\"" + analysis + "\"]").build();
    int denied = org.sparkproject.connect.grpc.Status.Code.PERMISSION_DENIED.value();  // clients do not retry it
    Status status = Status.newBuilder().setCode(denied).setMessage(message).addDetails(Any.pack(info)).build();
    StatusRuntimeException thrown = StatusProto.toStatusRuntimeException(status);
    call.close(thrown.getStatus(), thrown.getTrailers() == null ? new Metadata() : thrown.getTrailers());
  }
}
