import java.io.*;
import java.nio.file.*;

// Judge0 names every program Main.java, whatever its public class.
public class Solution {
	public static void main(String[] args) throws IOException {
		System.out.println("hello");
		System.out.println(String.join(" ", args));
		System.out.println(new BufferedReader(new InputStreamReader(System.in)).readLine());
		System.out.println(Files.readString(Path.of("in.txt")).trim());
		Files.writeString(Path.of("artifacts/out.txt"), "made by java\n");
	}
}
