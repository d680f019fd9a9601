// An Iceberg REST catalog server for the tests: Iceberg's own REST adapter and servlet (the
// ones its REST catalog fixture runs), over a JdbcCatalog in a SQLite file, on loopback.
//   IcebergRest <warehouse> <sqlite file>   prints "port <n>" once it listens, then serves until killed
import java.util.Map;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.rest.RESTCatalogAdapter;
import org.apache.iceberg.rest.RESTCatalogServlet;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public class IcebergRest {
    public static void main(String[] args) throws Exception {
        Catalog backend = CatalogUtil.buildIcebergCatalog("rest_backend", Map.of(
                "catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog", "uri", "jdbc:sqlite:" + args[1],
                "jdbc.schema-version", "V1", "warehouse", args[0]), new Configuration());
        ServletContextHandler context = new ServletContextHandler(ServletContextHandler.NO_SESSIONS);
        context.addServlet(new ServletHolder(new RESTCatalogServlet(new RESTCatalogAdapter(backend))), "/*");
        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        server.setHandler(context);
        server.start();
        System.out.println("port " + connector.getLocalPort());
        System.out.flush();
        server.join();
    }
}
