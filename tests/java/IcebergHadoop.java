// Java's own Iceberg (iceberg-core's HadoopCatalog, iceberg-data's generic records) on a
// Hadoop catalog's warehouse: the other engine that reads what streamsql wrote, and writes
// what streamsql reads (tests/test_iceberg_hadoop.py).
//   read <warehouse> <db> <table>          each row as tab-separated values, then "snapshots <n>"
//   write <warehouse> <db> <table> <rows>  creates the table (id BIGINT key, name STRING, amount DOUBLE)
//                                          and appends rows 1..rows in one commit
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DataFiles;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Table;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.GenericAppenderFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.hadoop.HadoopCatalog;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.FileAppender;
import org.apache.iceberg.io.OutputFile;
import org.apache.iceberg.types.Types;

public class IcebergHadoop {
    public static void main(String[] args) throws Exception {
        HadoopCatalog catalog = new HadoopCatalog(new Configuration(), args[1]);
        TableIdentifier id = TableIdentifier.of(Namespace.of(args[2]), args[3]);
        if (args[0].equals("read")) {
            Table table = catalog.loadTable(id);
            List<String> lines = new ArrayList<>();
            try (CloseableIterable<Record> rows = IcebergGenerics.read(table).build()) {
                for (Record row : rows) {
                    StringBuilder line = new StringBuilder();
                    for (int i = 0; i < row.size(); i++) {
                        line.append(i == 0 ? "" : "\t").append(row.get(i));
                    }
                    lines.add(line.toString());
                }
            }
            lines.forEach(System.out::println);
            int snapshots = 0;
            for (Object ignored : table.snapshots()) snapshots++;
            System.out.println("snapshots " + snapshots);
            return;
        }
        Schema schema = new Schema(List.of(
                Types.NestedField.required(1, "id", Types.LongType.get()),
                Types.NestedField.optional(2, "name", Types.StringType.get()),
                Types.NestedField.optional(3, "amount", Types.DoubleType.get())), java.util.Set.of(1));
        Table table = catalog.createTable(id, schema, PartitionSpec.unpartitioned());
        OutputFile out = table.io().newOutputFile(table.location() + "/data/" + UUID.randomUUID() + ".parquet");
        FileAppender<Record> appender = new GenericAppenderFactory(schema).newAppender(out, FileFormat.PARQUET);
        int rows = Integer.parseInt(args[4]);
        try (appender) {
            for (long i = 1; i <= rows; i++) {
                GenericRecord record = GenericRecord.create(schema);
                record.setField("id", i);
                record.setField("name", i % 3 == 0 ? null : "n" + i);
                record.setField("amount", i * 1.5);
                appender.add(record);
            }
        }
        DataFile file = DataFiles.builder(PartitionSpec.unpartitioned()).withInputFile(out.toInputFile())
                .withMetrics(appender.metrics()).withFormat(FileFormat.PARQUET).build();
        table.newAppend().appendFile(file).commit();
    }
}
