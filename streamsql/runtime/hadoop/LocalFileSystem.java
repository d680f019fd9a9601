package streamsql.hadoop;

/** Hadoop's local file system (checksums included) over {@link PosixLocalFileSystem}. */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new PosixLocalFileSystem());
  }
}
