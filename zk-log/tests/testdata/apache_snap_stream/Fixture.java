// Writes the fixtures beside it with Java's own compressors, as Apache ZooKeeper uses them:
// blocks.snappy (snappy-java's SnappyOutputStream, 1 KiB blocks so that there are several) and
// content.gz (java.util.zip.GZIPOutputStream), both of the same text. Run from this directory:
//   java -cp /usr/share/java/snappy-java.jar Fixture.java
// (Debian's libsnappy-java 1.1.8.3). zk-log/src/apache_snap_stream/tests.rs builds the same
// text and checks that both decode to it.
import java.io.FileOutputStream;
import java.io.OutputStream;
import java.util.zip.GZIPOutputStream;
import org.xerial.snappy.SnappyOutputStream;

public class Fixture {
    public static void main(String[] args) throws Exception {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 120; i++) {
            text.append(String.format("line %d: %s\n", i, "x".repeat(i % 37)));
        }
        byte[] content = text.toString().getBytes("UTF-8");
        try (OutputStream o = new SnappyOutputStream(new FileOutputStream("blocks.snappy"), 1024)) {
            o.write(content);
        }
        try (OutputStream o = new GZIPOutputStream(new FileOutputStream("content.gz"))) {
            o.write(content);
        }
        System.out.println(content.length + " bytes of content");
    }
}
